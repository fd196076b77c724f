"""AITune's import path for the profiling strategies' base and results (docs/guide.md, "Coming from AITune")."""

from aitune.torch.tune_strategy.profiling_strategy import ProfilingTuneStrategy
from aitune.torch.tune_strategy.strategy_results import BackendPerfResult, BackendProfilingResult

__all__ = ["BackendPerfResult", "BackendProfilingResult", "ProfilingTuneStrategy"]
