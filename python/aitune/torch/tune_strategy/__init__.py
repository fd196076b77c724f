"""Tune strategies (docs/reference/api.md#strategy-classes)."""

from aitune.torch.tune_strategy.first_wins_strategy import FirstWinsStrategy
from aitune.torch.tune_strategy.one_backend_strategy import OneBackendStrategy
from aitune.torch.tune_strategy.profiling_strategy import (
    LatencyBudgetStrategy,
    MaxThroughputStrategy,
    MinLatencyStrategy,
    ProfilingTuneStrategy,
)
from aitune.torch.tune_strategy.quantized_candidates import quantized_candidates
from aitune.torch.tune_strategy.tune_strategy import TuneStrategy

__all__ = [
    "FirstWinsStrategy",
    "LatencyBudgetStrategy",
    "MaxThroughputStrategy",
    "MinLatencyStrategy",
    "OneBackendStrategy",
    "ProfilingTuneStrategy",
    "TuneStrategy",
    "quantized_candidates",
]
