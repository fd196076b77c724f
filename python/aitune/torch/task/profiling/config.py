from __future__ import annotations

import dataclasses
from typing import Any

DEFAULT_BATCH_SIZES = [2**n for n in range(21)]


@dataclasses.dataclass(frozen=True)
class ModelExecutionTimeMeasuringStrategy:
    """One measured call (SPEC §8.1): synchronise, host clock + CUDA start event, call, end
    event, synchronise, host clock. The only strategy; kept as a class for compatibility."""


@dataclasses.dataclass(frozen=True)
class NumStepsMeasuringStopStrategy:
    num_steps: int = 20
    warmup_samples: int = 10

    def to_native(self) -> dict[str, Any]:
        return {"kind": "fixed", "num_steps": self.num_steps, "warmup_samples": self.warmup_samples}


@dataclasses.dataclass(frozen=True)
class StableWindowMeasuringStopStrategy:
    window_size: int = 20
    max_cv_ratio: float = 0.10
    warmup_samples: int = 10
    max_samples: int = 100

    def to_native(self) -> dict[str, Any]:
        return {"kind": "stable", "window_size": self.window_size, "max_cv_ratio": self.max_cv_ratio,
                "warmup_samples": self.warmup_samples, "max_samples": self.max_samples}


@dataclasses.dataclass(frozen=True)
class ThroughputSaturatedProfilingStopStrategy:
    min_throughput_gain_ratio: float = 0.05
    throughput_backoff_limit: int = 2

    def to_native(self) -> dict[str, Any]:
        return {"rule": "saturated", "min_throughput_gain_ratio": self.min_throughput_gain_ratio,
                "throughput_backoff_limit": self.throughput_backoff_limit}


@dataclasses.dataclass(frozen=True)
class AllSamplesProfilingStopStrategy:
    def to_native(self) -> dict[str, Any]:
        return {"rule": "all"}


@dataclasses.dataclass
class ProfilingConfig:
    batch_sizes: list[int] = dataclasses.field(default_factory=lambda: list(DEFAULT_BATCH_SIZES))
    batching: bool = True
    measuring_strategy: Any = None
    measurement_stop_strategy: Any = None
    profiling_stop_strategy: Any = None

    def __post_init__(self) -> None:
        if not self.batch_sizes or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in self.batch_sizes):
            raise ValueError(f"ProfilingConfig.batch_sizes must be positive ints, got {self.batch_sizes!r}")
        self.measuring_strategy = self.measuring_strategy or ModelExecutionTimeMeasuringStrategy()
        self.measurement_stop_strategy = self.measurement_stop_strategy or NumStepsMeasuringStopStrategy()
        self.profiling_stop_strategy = self.profiling_stop_strategy or ThroughputSaturatedProfilingStopStrategy()

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "batch_sizes": self.batch_sizes,
            "batching": self.batching,
            "measurement_stop_strategy": dataclasses.asdict(self.measurement_stop_strategy),
            "profiling_stop_strategy": type(self.profiling_stop_strategy).__name__,
        }


def default_profiling_config() -> ProfilingConfig:
    return ProfilingConfig()
