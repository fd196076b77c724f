"""AITune's import path for LatencyBudgetStrategy and its result (docs/guide.md, "Coming from AITune")."""

from aitune.torch.tune_strategy.profiling_strategy import LatencyBudgetStrategy
from aitune.torch.tune_strategy.strategy_results import LatencyBudgetProfilingResult

__all__ = ["LatencyBudgetProfilingResult", "LatencyBudgetStrategy"]
