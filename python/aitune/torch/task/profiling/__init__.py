"""Measurement configuration (SPEC §1.4, §8). The loop, statistics and stop rules run in the
C++ core; these classes are the Python-facing settings."""

from aitune.torch.task.profiling.config import (
    AllSamplesProfilingStopStrategy,
    ModelExecutionTimeMeasuringStrategy,
    NumStepsMeasuringStopStrategy,
    ProfilingConfig,
    StableWindowMeasuringStopStrategy,
    ThroughputSaturatedProfilingStopStrategy,
    default_profiling_config,
)

__all__ = [
    "AllSamplesProfilingStopStrategy",
    "ModelExecutionTimeMeasuringStrategy",
    "NumStepsMeasuringStopStrategy",
    "ProfilingConfig",
    "StableWindowMeasuringStopStrategy",
    "ThroughputSaturatedProfilingStopStrategy",
    "default_profiling_config",
]
