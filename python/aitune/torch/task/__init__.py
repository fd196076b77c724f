"""Tasks a strategy runs on a candidate: correctness checks (correctness.py, numeric.py), the
batch-size sweep (profile.py) and the measuring rules (profiling/). AITune's names for the
measuring rules are re-exported here, as AITune's `aitune.torch.task` does."""

from aitune.torch.task.profiling import (
    MeasuringStopStrategy,
    MeasuringStrategy,
    ModelExecutionTimeMeasuringStrategy,
    NumStepsMeasuringStopStrategy,
    ProfilingConfig,
    ProfilingResultEvent,
    ProfilingResults,
    ProfilingStatus,
    StableWindowMeasuringStopStrategy,
    get_inference_events,
    profile,
)

__all__ = [
    "MeasuringStopStrategy",
    "MeasuringStrategy",
    "ModelExecutionTimeMeasuringStrategy",
    "NumStepsMeasuringStopStrategy",
    "ProfilingConfig",
    "ProfilingResultEvent",
    "ProfilingResults",
    "ProfilingStatus",
    "StableWindowMeasuringStopStrategy",
    "get_inference_events",
    "profile",
]
