"""AITune's import path for MinLatencyStrategy and its result (docs/guide.md, "Coming from AITune")."""

from aitune.torch.tune_strategy.profiling_strategy import MinLatencyStrategy
from aitune.torch.tune_strategy.strategy_results import MinLatencyProfilingResult

__all__ = ["MinLatencyProfilingResult", "MinLatencyStrategy"]
