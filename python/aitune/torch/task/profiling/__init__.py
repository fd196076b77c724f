"""Measurement configuration (docs/reference/api.md#other-modules, docs/reference/measurement.md). The loop, statistics
and stop rules run in the C++ core; these classes are the Python-facing settings, at AITune's module paths (events,
metrics, measuring_strategy, measuring_stop_strategy, profiling_stop_strategy, config), and AITune's Python
profiling loop (profiling.py)."""

from aitune.torch.task.profiling.config import ProfilingConfig, default_profiling_config
from aitune.torch.task.profiling.events import ProfilingResultEvent, get_inference_events
from aitune.torch.task.profiling.measuring_stop_strategy import (
    MeasuringStopStrategy,
    NumStepsMeasuringStopStrategy,
    StableWindowMeasuringStopStrategy,
)
from aitune.torch.task.profiling.measuring_strategy import MeasuringStrategy, ModelExecutionTimeMeasuringStrategy
from aitune.torch.task.profiling.metrics import get_latency, get_throughput, is_throughput_saturated
from aitune.torch.task.profiling.profiling import ProfilingResults, ProfilingStatus, profile
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
    "ProfilingResultEvent",
    "ProfilingResults",
    "ProfilingStatus",
    "ProfilingStopStrategy",
    "StableWindowMeasuringStopStrategy",
    "ThroughputSaturatedProfilingStopStrategy",
    "default_profiling_config",
    "get_inference_events",
    "get_latency",
    "get_throughput",
    "is_throughput_saturated",
    "profile",
]
