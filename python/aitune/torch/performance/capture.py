"""One ait.profile capture: `warmup_runs` calls with the profiler idle, one profiler warm-up call
(it absorbs the profiler's own buffer allocation), then `measured_runs` recorded calls, each
inside the `aitune.performance.profiled_run` marker and timed by the host clock (CUDA
synchronised). The recorded events are then attributed to runs and regions."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Union

import torch

if TYPE_CHECKING:
    from torch.autograd.profiler_util import FunctionEvent, FunctionEventAvg

from aitune.torch.performance.regions import AOT_PREFIX, RUN_MARKER, UNTUNED_PREFIX, Region, RegionHooks

KEY_AVERAGES_ROW_LIMIT = 20


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


# A torch profiler event: one call, or the average of a key's calls.
ProfilerEvent = Union["FunctionEvent", "FunctionEventAvg"]


def _us(event: ProfilerEvent, attr: str) -> float:
    return float(getattr(event, attr, 0.0) or 0.0)


def _device_us(event: ProfilerEvent) -> float | None:
    value = _us(event, "device_time_total")
    return value if value > 0 else None


def _is_cpu(event: ProfilerEvent) -> bool:
    device_type = getattr(event, "device_type", None)
    return device_type is None or str(device_type) == "DeviceType.CPU"


@dataclasses.dataclass
class Capture:
    wall_times_us: list[float]
    events: list[FunctionEvent]
    key_averages: list[FunctionEventAvg]
    activities: list[str]


def capture(
    fn: Callable,
    args: tuple,
    kwargs: dict,
    regions: list[Region],
    warmup_runs: int,
    measured_runs: int,
    trace_file: Path | None,
) -> Capture:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    options: dict[str, object] = {
        "activities": activities,
        "acc_events": True,  # the last step() ends the cycle, which would otherwise drop its events
        "schedule": torch.profiler.schedule(skip_first=warmup_runs, wait=0, warmup=1, active=measured_runs),
    }
    if trace_file is not None:
        trace_file.parent.mkdir(parents=True, exist_ok=True)
        options["on_trace_ready"] = lambda prof: prof.export_chrome_trace(str(trace_file))
    wall_times_us: list[float] = []
    with RegionHooks(regions), torch.profiler.profile(**options) as prof, torch.no_grad():
        for step in range(warmup_runs + 1 + measured_runs):
            if step <= warmup_runs:  # the requested warm-up, then the profiler's own warm-up call
                fn(*args, **kwargs)
                _sync()
            else:
                _sync()
                start = time.perf_counter_ns()
                with torch.profiler.record_function(RUN_MARKER):
                    fn(*args, **kwargs)
                _sync()
                wall_times_us.append((time.perf_counter_ns() - start) / 1000)
            prof.step()
    return Capture(
        wall_times_us, list(prof.events() or []), list(prof.key_averages() or []), [a.name for a in activities]
    )


class KernelLaunches:
    """The device time of the kernels (and copies) launched while a host-clock window was open.

    The profiler ties each kernel to the host operator that launched it (CUPTI correlation);
    that operator's start time says when. Summing by launch time counts a kernel once and
    finds it whichever thread launched it: an operator of the C++ runtime or a TensorRT enqueue
    need not be a child of the region's record on the Python thread."""

    def __init__(self, events: list[FunctionEvent]) -> None:
        launches = sorted(
            (float(event.time_range.start), sum(float(k.duration) for k in event.kernels))
            for event in events
            if _is_cpu(event) and getattr(event, "kernels", None)
        )
        self._starts = [start for start, _ in launches]
        self._cumulative = list(itertools.accumulate((duration for _, duration in launches), initial=0.0))

    def __bool__(self) -> bool:
        return bool(self._starts)

    def device_us(self, event: FunctionEvent) -> float | None:
        """Device µs of the work launched between the event's start and end; None without any."""
        if not self._starts:
            return None
        first = bisect.bisect_left(self._starts, float(event.time_range.start))
        last = bisect.bisect_right(self._starts, float(event.time_range.end))
        total = self._cumulative[last] - self._cumulative[first]
        return total if last > first else None


class Attribution:
    """Region times per run: each region event belongs to the run whose marker encloses it; an
    AOT region nested inside another AOT region is left to the outer one (counted once). CPU time
    is the profiler's own per event; device time is the kernel profiler's: the kernels launched
    while the region (or the run) was open (KernelLaunches)."""

    def __init__(self, cap: Capture) -> None:
        self.markers = [e for e in cap.events if _is_cpu(e) and getattr(e, "name", "") == RUN_MARKER]
        if len(self.markers) != len(cap.wall_times_us):
            raise RuntimeError(
                f"The PyTorch Profiler recorded {len(self.markers)} run marker(s) for "
                f"{len(cap.wall_times_us)} measured run(s); the profile cannot be attributed"
            )
        self.launches = KernelLaunches(cap.events)
        marker_index = {id(m): i for i, m in enumerate(self.markers)}
        self.per_run: dict[int, dict[str, dict[str, object]]] = {}
        self.observed: dict[str, list[str]] = {AOT_PREFIX: [], UNTUNED_PREFIX: []}
        self.unmapped_aot = 0
        for event in cap.events:
            name = getattr(event, "name", "")
            prefix = (
                AOT_PREFIX
                if name.startswith(AOT_PREFIX)
                else UNTUNED_PREFIX
                if name.startswith(UNTUNED_PREFIX)
                else None
            )
            if prefix is None or not _is_cpu(event):
                continue
            run, nested = None, False
            parent = getattr(event, "cpu_parent", None)
            while parent is not None:
                if id(parent) in marker_index:
                    run = marker_index[id(parent)]
                    break
                nested = nested or getattr(parent, "name", "").startswith(AOT_PREFIX)
                parent = getattr(parent, "cpu_parent", None)
            if prefix == AOT_PREFIX and nested:
                continue
            region_name = name[len(prefix) :]
            if region_name not in self.observed[prefix]:
                self.observed[prefix].append(region_name)
            if run is None:
                self.unmapped_aot += prefix == AOT_PREFIX  # untuned events outside a run are warm-up noise
                continue
            kind = "aot_module" if prefix == AOT_PREFIX else "untuned_module"
            agg = self.per_run.setdefault(run, {}).setdefault(
                f"{kind}:{region_name}", {"calls": 0, "cpu_time_us": 0.0, "device_time_us": None}
            )
            agg["calls"] += 1
            agg["cpu_time_us"] += _us(event, "cpu_time_total")
            device = self._device_us(event)
            if device is not None:
                agg["device_time_us"] = (agg["device_time_us"] or 0.0) + device

    def _device_us(self, event: FunctionEvent) -> float | None:
        if self.launches:
            return self.launches.device_us(event)
        return _device_us(event)  # no kernel launches recorded: what the profiler rolled up, if any

    def runs(self, wall_times_us: list[float]) -> list[dict[str, object]]:
        out = []
        for index, (marker, wall) in enumerate(zip(self.markers, wall_times_us)):
            cpu, device = _us(marker, "cpu_time_total"), self._device_us(marker)
            timing: dict[str, object] = {"wall_time_us": wall, "cpu_time_us": cpu}
            if device is not None:
                timing["device_time_us"] = device
            regions = []
            for rid, agg in self.per_run.get(index, {}).items():
                row: dict[str, object] = {"region_id": rid, "calls": agg["calls"], "cpu_time_us": agg["cpu_time_us"]}
                if cpu > 0:
                    row["cpu_time_fraction"] = agg["cpu_time_us"] / cpu
                if agg["device_time_us"] is not None:
                    row["device_time_us"] = agg["device_time_us"]
                    if device:
                        row["device_time_fraction"] = agg["device_time_us"] / device
                regions.append(row)
            out.append(
                {"run_index": index, "timing": timing, "regions": regions, "residual": _residual(cpu, device, regions)}
            )
        return out


def _residual(cpu: float, device: float | None, regions: list[dict[str, object]]) -> dict[str, object]:
    """The run's time no region accounts for (framework dispatch, glue code, the rest)."""
    rest_cpu = max(0.0, cpu - sum(r["cpu_time_us"] for r in regions))
    out: dict[str, object] = {"cpu_time_us": rest_cpu, "cpu_time_fraction": rest_cpu / cpu if cpu > 0 else 0.0}
    if device:
        rest_device = max(0.0, device - sum(r.get("device_time_us", 0.0) for r in regions))
        out.update(device_time_us=rest_device, device_time_fraction=rest_device / device)
    return out


def key_averages_summary(key_averages: list[FunctionEventAvg]) -> dict[str, object]:
    """The top rows of the profiler's own per-operator averages, by CPU time (and by device time
    when there is any)."""

    def view(sort_by: str) -> dict[str, object]:
        rows = sorted(key_averages, key=lambda e: _us(e, sort_by), reverse=True)[:KEY_AVERAGES_ROW_LIMIT]
        return {"sort_by": sort_by, "row_limit": KEY_AVERAGES_ROW_LIMIT, "events": [_row(e) for e in rows]}

    views = {"cpu_time_total": view("cpu_time_total")}
    if any(_us(e, "device_time_total") > 0 for e in key_averages):
        views["device_time_total"] = view("device_time_total")
    return views


def _row(event: FunctionEventAvg) -> dict[str, object]:
    row: dict[str, object] = {
        "key": str(getattr(event, "key", "")),
        "device_type": str(getattr(event, "device_type", "unknown")).removeprefix("DeviceType."),
        "count": int(getattr(event, "count", 0) or 0),
        "self_cpu_time_total_us": _us(event, "self_cpu_time_total"),
        "cpu_time_total_us": _us(event, "cpu_time_total"),
    }
    for name in ("self_device_time_total", "device_time_total"):
        if _us(event, name) > 0:
            row[f"{name}_us"] = _us(event, name)
    return row
