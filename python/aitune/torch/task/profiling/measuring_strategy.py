"""How one call is timed (docs/reference/measurement.md#one-measured-call). aitune times calls in the C++ core
(`_C.time_call`: host clock, plus CUDA events on a GPU); `do_measurement` gives AITune's event form of one such call
(docs/guide.md, "Coming from AITune")."""

from __future__ import annotations

import abc
import dataclasses
import itertools
import time
from typing import Callable

import torch

from aitune._native import _C
from aitune.torch.task.profiling.events import ProfilingResultEvent

_measurement_ids = itertools.count(1)


class MeasuringStrategy(abc.ABC):
    @abc.abstractmethod
    def do_measurement(
        self, batch_size: int, model: Callable, sample: tuple[tuple, dict], **measurement_kwargs: object
    ) -> list[ProfilingResultEvent]: ...


@dataclasses.dataclass(frozen=True)
class ModelExecutionTimeMeasuringStrategy(MeasuringStrategy):
    """One measured call: synchronise, host clock (and CUDA events on a GPU), call, synchronise."""

    def do_measurement(
        self, batch_size: int, model: Callable, sample: tuple[tuple, dict], **measurement_kwargs: object
    ) -> list[ProfilingResultEvent]:
        args, kwargs = sample
        cuda_index = torch.cuda.current_device() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        started = time.monotonic_ns()
        with torch.no_grad():
            host_ns, _ = _C.time_call(lambda: model(*args, **kwargs), cuda_index)
        return [
            ProfilingResultEvent(
                timestamp=started,
                model_name=measurement_kwargs.get("model_name"),
                backend_details=measurement_kwargs.get("backend_details"),
                batch_size=batch_size,
                phase="inference",
                measurement_id=next(_measurement_ids),
                execution_time=float(host_ns),
            )
        ]
