"""AITune 0.6 import path, re-exporting aitune's objects (tests/compat/aitune_paths.py; docs/guide.md)."""

from aitune.torch.tune_strategy.profiling_strategy import ProfilingTuneStrategy
from aitune.torch.tune_strategy.strategy_results import BackendPerfResult, BackendProfilingResult

__all__ = ["BackendPerfResult", "BackendProfilingResult", "ProfilingTuneStrategy"]
