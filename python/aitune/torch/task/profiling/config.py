"""ProfilingConfig (docs/reference/measurement.md): the batch sizes and the rules a strategy measures with. The rules
live in their AITune-named modules (measuring_stop_strategy.py, profiling_stop_strategy.py,
measuring_strategy.py) and are re-exported here."""

from __future__ import annotations

import dataclasses
import types

from aitune.exceptions import InvalidValueError
from aitune.torch.task.profiling.measuring_stop_strategy import (
    MeasuringStopStrategy,
    NumStepsMeasuringStopStrategy,
    StableWindowMeasuringStopStrategy,
)
from aitune.torch.task.profiling.measuring_strategy import MeasuringStrategy, ModelExecutionTimeMeasuringStrategy
from aitune.torch.task.profiling.profiling_stop_strategy import (
    AllSamplesProfilingStopStrategy,
    ProfilingStopStrategy,
    ThroughputSaturatedProfilingStopStrategy,
)

__all__ = [
    "AllSamplesProfilingStopStrategy",
    "MeasuringStopStrategy",
    "MeasuringStrategy",
    "ModelExecutionTimeMeasuringStrategy",
    "NumStepsMeasuringStopStrategy",
    "ProfilingConfig",
    "ProfilingStopStrategy",
    "StableWindowMeasuringStopStrategy",
    "ThroughputSaturatedProfilingStopStrategy",
    "default_profiling_config",
]

DEFAULT_BATCH_SIZES = [2**n for n in range(21)]


@dataclasses.dataclass
class ProfilingConfig:
    batch_sizes: list[int] = dataclasses.field(default_factory=lambda: list(DEFAULT_BATCH_SIZES))
    batching: bool = True
    measuring_strategy: MeasuringStrategy | None = None
    measurement_stop_strategy: MeasuringStopStrategy | None = None
    profiling_stop_strategy: ProfilingStopStrategy | None = None

    def __post_init__(self) -> None:
        if isinstance(self.batch_sizes, (types.GeneratorType, range, tuple)):
            self.batch_sizes = list(self.batch_sizes)  # AITune accepts a generator of sizes
        if not self.batch_sizes or any(
            isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in self.batch_sizes
        ):
            raise InvalidValueError(f"ProfilingConfig.batch_sizes must be positive ints, got {self.batch_sizes!r}")
        self.measuring_strategy = self.measuring_strategy or ModelExecutionTimeMeasuringStrategy()
        self.measurement_stop_strategy = self.measurement_stop_strategy or NumStepsMeasuringStopStrategy()
        self.profiling_stop_strategy = self.profiling_stop_strategy or ThroughputSaturatedProfilingStopStrategy()

    def to_json_dict(self) -> dict[str, object]:
        return {
            "batch_sizes": self.batch_sizes,
            "batching": self.batching,
            "measurement_stop_strategy": dataclasses.asdict(self.measurement_stop_strategy),
            "profiling_stop_strategy": type(self.profiling_stop_strategy).__name__,
        }


def default_profiling_config() -> ProfilingConfig:
    return ProfilingConfig()
