"""AITune 0.6 import path, re-exporting aitune's objects (tests/compat/aitune_paths.py; docs/guide.md)."""

from aitune.torch.tune_strategy.profiling_strategy import MaxThroughputStrategy
from aitune.torch.tune_strategy.strategy_results import MaxThroughputProfilingResult

__all__ = ["MaxThroughputProfilingResult", "MaxThroughputStrategy"]
