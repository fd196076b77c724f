"""AITune's import path for MaxThroughputStrategy and its result (docs/guide.md, "Coming from AITune")."""

from aitune.torch.tune_strategy.profiling_strategy import MaxThroughputStrategy
from aitune.torch.tune_strategy.strategy_results import MaxThroughputProfilingResult

__all__ = ["MaxThroughputProfilingResult", "MaxThroughputStrategy"]
