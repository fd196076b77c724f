"""AITune's Python profiling loop (`profile`, `profile_backend`, `ProfilingStatus`), at its module
path (docs/guide.md, "Coming from AITune"): a sweep over batch sizes in which the configured
measuring strategy times calls until the measurement stop rule is satisfied, and the profiling
stop rule ends the sweep. aitune's own strategies measure in the C++ core (task/sweep.py);
this loop is for programs that drive AITune's measuring and stop rules themselves."""

from __future__ import annotations

import copy
import dataclasses
import enum
import logging
from typing import Callable, Iterable, Iterator

import torch

from aitune.torch.backend.backend import Backend
from aitune.torch.dataloader import samples_generator
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.task.batching import make_batch
from aitune.torch.task.profiling.config import ProfilingConfig
from aitune.torch.task.profiling.events import ProfilingResultEvent, get_inference_events

logger = logging.getLogger("aitune")


@dataclasses.dataclass
class ProfilingResults:
    """Every event the sweep measured, in order."""

    entries: list[ProfilingResultEvent] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ProfilingStatus:
    """How a sweep ended: SUCCESS (`results` holds what was measured) or FAILURE (`error` says
    why; `results` holds the events measured before it)."""

    class Status(enum.Enum):
        SUCCESS = "success"
        FAILURE = "failure"

    status: Status
    error: BaseException | str | None = None
    results: ProfilingResults | None = None


def profile(
    func: Callable,
    dataset: Iterable,
    profiling_config: ProfilingConfig,
    model_name: str | None = None,
    backend_details: str | None = None,
) -> ProfilingStatus:
    """Profiles `func` on the first batch of each of the config's batch sizes drawn from `dataset`."""
    batches = samples_generator(dataset, profiling_config.batch_sizes, max_num_batches_per_batch_size=1)
    return _sweep(func, batches, profiling_config, model_name or "model", backend_details or "backend")


def profile_backend(
    backend: Backend,
    name: str,
    graph_spec: GraphSpec,
    data: list[Sample] | list[tuple[tuple, dict]],
    profiling_config: ProfilingConfig,
) -> ProfilingStatus:
    """Profiles `backend.infer` on the graph's first sample, resized to each batch size of the config
    (or as recorded when the config does not batch)."""
    if not data:
        raise ValueError(f"profile_backend for '{name}': data is empty; expected at least one sample of the graph")
    first = data[0] if isinstance(data[0], Sample) else Sample(*_args_kwargs(data[0]), batch_size=None)

    def batches() -> Iterator[tuple[int, tuple, dict]]:
        if not profiling_config.batching:
            yield 1, first.args, first.kwargs
            return
        for batch_size in profiling_config.batch_sizes:
            args, kwargs = make_batch(graph_spec, first, batch_size)
            yield batch_size, args, kwargs

    return _sweep(backend.infer, batches(), profiling_config, name, backend.describe())


def _args_kwargs(sample: tuple[tuple, dict]) -> tuple[tuple, dict]:
    args, kwargs = sample
    return tuple(args), dict(kwargs)


def _sweep(
    func: Callable,
    batches: Iterable[tuple[int, tuple, dict]],
    config: ProfilingConfig,
    model_name: str,
    backend_details: str,
) -> ProfilingStatus:
    sweep_rule = copy.deepcopy(config.profiling_stop_strategy)  # the rules count what they saw
    results = ProfilingResults()
    try:
        for batch_size, args, kwargs in batches:
            events = _measure_batch_size(func, batch_size, args, kwargs, config, model_name, backend_details)
            if events is None:
                break
            results.entries += events
            if sweep_rule.should_stop(get_inference_events(events)):
                break
    except Exception as e:  # noqa: BLE001 - a failed sweep is a status, as in AITune
        return ProfilingStatus(ProfilingStatus.Status.FAILURE, error=e, results=results)
    return ProfilingStatus(ProfilingStatus.Status.SUCCESS, results=results)


def _measure_batch_size(
    func: Callable,
    batch_size: int,
    args: tuple,
    kwargs: dict,
    config: ProfilingConfig,
    model_name: str,
    backend_details: str,
) -> list[ProfilingResultEvent] | None:
    """The events of one batch size; None when a call fails (out of memory included), which ends
    the sweep at the sizes measured so far."""
    stop_rule = copy.deepcopy(config.measurement_stop_strategy)
    events: list[ProfilingResultEvent] = []
    try:
        while True:
            # A fresh copy per call: a stateful model (a KV cache) must not see its own outputs.
            new = config.measuring_strategy.do_measurement(
                batch_size,
                func,
                copy.deepcopy((args, kwargs)),
                model_name=model_name,
                backend_details=backend_details,
            )
            events += new
            if stop_rule.should_stop(get_inference_events(new)):
                return events
    except torch.OutOfMemoryError:
        logger.warning(
            "Out of memory while profiling %s (%s) at batch size %d", model_name, backend_details, batch_size
        )
    except Exception as e:  # noqa: BLE001 - the sweep ends at the sizes that ran
        logger.warning("Profiling %s (%s) failed at batch size %d: %s", model_name, backend_details, batch_size, e)
    return None
