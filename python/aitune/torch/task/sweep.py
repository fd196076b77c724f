"""Profiling a candidate over batch sizes (docs/reference/measurement.md): the loop, statistics and stop rules run
natively (aitune._C.measure_batch, time_call, SweepState); this module prepares inputs."""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from typing import Callable

import torch

from aitune._native import _C
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.task.batching import make_batch
from aitune.torch.task.profiling.config import ProfilingConfig
from aitune.torch.utils.progress import LiveLine

logger = logging.getLogger("aitune")
# Held while measuring. A multi-device tuning worker puts the device pool's shared lock here
# (multi_device/worker.py), so the workers' measurements take turns while their builds overlap.
MEASUREMENT_LOCK: list[contextlib.AbstractContextManager] = [contextlib.nullcontext()]
NUM_INPUT_SETS = 3  # inputs rotate among this many copies so a cache-resident input does not flatter


class SweepLimits:
    """Optional limits of one sweep and, after it, what stopped it (`stopped_by`, a phrase for
    the log). `time_budget_s` bounds the sweep's wall time: a batch size is not started when the
    time so far plus its predicted duration (the last size's, scaled by the batch ratio) would
    exceed it. `clock` is injectable for tests."""

    def __init__(self, time_budget_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.time_budget_s = time_budget_s
        self.clock = clock
        self.stopped_by = ""
        self.elapsed_s = 0.0


def profile(
    fn: Callable,
    graph: GraphSpec,
    data: list[Sample],
    config: ProfilingConfig,
    device: torch.device,
    batch_sizes: list[int],
    stop_above_latency_ms: float | None = None,
    label: str | None = None,
    limits: SweepLimits | None = None,
) -> list[dict[str, object]]:
    """Measures `fn` at each batch size (until the sweep saturates, or `limits` stop it). An
    out-of-memory or any other error ends the sweep with a warning; results so far are kept.
    `label` names what is measured on the terminal's live status line."""
    limits = limits or SweepLimits()
    with MEASUREMENT_LOCK[0], LiveLine(f"📏 measuring {label or getattr(fn, '__qualname__', 'the candidate')}") as line:
        return _sweep(fn, graph, data, config, device, batch_sizes, stop_above_latency_ms, line, limits)


def _over_budget(limits: SweepLimits, start: float, last: tuple[int, float] | None, next_bs: int) -> str:
    """The reason not to start batch size `next_bs`, or "" to go on."""
    if limits.time_budget_s is None or last is None:
        return ""
    elapsed = limits.clock() - start
    last_bs, last_duration = last
    predicted = last_duration * max(1.0, next_bs / max(last_bs, 1))
    if elapsed + predicted <= limits.time_budget_s:
        return ""
    return (
        f"the time budget of {limits.time_budget_s:g} s (spent {elapsed:.1f} s; batch size {next_bs} "
        f"would take about {predicted:.1f} s more)"
    )


def _sweep(
    fn: Callable,
    graph: GraphSpec,
    data: list[Sample],
    config: ProfilingConfig,
    device: torch.device,
    batch_sizes: list[int],
    stop_above_latency_ms: float | None,
    line: LiveLine,
    limits: SweepLimits,
) -> list[dict[str, object]]:
    base_text = line.text
    start = limits.clock()
    last: tuple[int, float] | None = None  # (batch size, seconds its measurement took)
    limits.stopped_by = "the last batch size to try"
    cuda_index = device.index if device.type == "cuda" else None
    if cuda_index is None and device.type == "cuda":
        cuda_index = torch.cuda.current_device()
    rule = config.measurement_stop_strategy.to_native()
    sweep = _C.SweepState(**config.profiling_stop_strategy.to_native())
    batching = config.batching and graph.has_batch_axis()
    results: list[dict[str, object]] = []
    for bs in batch_sizes:
        reason = _over_budget(limits, start, last, bs) if batching else ""
        if reason:
            limits.stopped_by = reason
            break
        size_start = limits.clock()
        line.update(f"{base_text} at batch size {bs}" if batching else base_text)
        sets: list = []

        def call(i: int, sets=sets) -> tuple:
            args, kwargs = copy.deepcopy(sets[i % len(sets)])  # outside the timed window
            with torch.no_grad():
                return _C.time_call(lambda: fn(*args, **kwargs), cuda_index)

        try:
            # Inside the try: at a large batch size, making the inputs can be what runs out of memory.
            sample = make_batch(graph, data[0], bs) if batching else (data[0].args, data[0].kwargs)
            sets.extend(copy.deepcopy(sample) for _ in range(NUM_INPUT_SETS))
            del sample
            result = _C.measure_batch(call, bs if batching else 1, rule)
        except torch.OutOfMemoryError as e:
            logger.warning("Out of memory at batch size %d; the sweep stops here (%s)", bs, str(e).splitlines()[0])
            limits.stopped_by = f"out of memory at batch size {bs}"
            break
        # the sweep keeps what it measured (docs/reference/measurement.md#batch-sweep)
        except Exception as e:  # noqa: BLE001
            if not results:
                raise
            logger.warning("Profiling stopped at batch size %d: %s: %s", bs, type(e).__name__, e)
            limits.stopped_by = f"an error at batch size {bs} ({type(e).__name__})"
            break
        finally:
            sets.clear()  # the closure keeps the list: empty it to free the inputs
            if device.type == "cuda":
                torch.cuda.empty_cache()
        results.append(result)
        last = (bs, limits.clock() - size_start)
        if not batching:
            break
        if stop_above_latency_ms is not None and result["host_latency_ms_mean"] > stop_above_latency_ms:
            limits.stopped_by = f"the latency limit of {stop_above_latency_ms:g} ms at batch size {bs}"
            break
        if sweep.add(bs, result["throughput_per_s"]):
            limits.stopped_by = f"the throughput plateau at batch size {bs}"
            break
    limits.elapsed_s = limits.clock() - start
    return results


def best_throughput(results: list[dict[str, object]]) -> dict[str, object] | None:
    best = None
    for r in results:
        if best is None or r["throughput_per_s"] > best["throughput_per_s"]:
            best = r
    return best
