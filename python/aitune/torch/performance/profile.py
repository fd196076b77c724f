"""ait.profile (docs/guide.md, "Profiling a call"): runs one representative input through an
object and reports, per measured run, the wall, CPU and device time, the share of each region
(tuned modules and untuned submodules) and the residual, plus the profiler's top operators.
`PerformanceProfile.data` is JSON-ready (schema_version 1, AITune's layout); `.markdown()`
renders it for people."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from pathlib import Path
from typing import Callable

import aitune
from aitune.exceptions import InvalidValueError
from aitune.torch.performance.capture import Attribution, capture, key_averages_summary
from aitune.torch.performance.markdown import render_markdown
from aitune.torch.performance.regions import (
    AOT_KIND,
    AOT_PREFIX,
    UNTUNED_KIND,
    UNTUNED_PREFIX,
    discover_regions,
    qualified_type_name,
    region_id,
)

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class PerformanceProfile:
    data: dict[str, object]
    trace_file: Path | None = None

    def markdown(self, options: object = None) -> str:
        if options is not None:
            raise InvalidValueError(
                f"PerformanceProfile.markdown(): markdown options are not supported yet; call markdown(), got {options!r}"
            )
        return render_markdown(self.data)


def _call_arguments(input_data: object) -> tuple[tuple, dict]:
    """A mapping is keyword arguments, a tuple positional arguments, None no arguments, and
    anything else the one positional argument."""
    if input_data is None:
        return (), {}
    if isinstance(input_data, Mapping):
        return (), dict(input_data)
    if isinstance(input_data, tuple):
        return input_data, {}
    return (input_data,), {}


def profile(
    obj: object,
    input_data: object,
    *,
    inference_function: Callable | None = None,
    warmup_runs: int = 3,
    measured_runs: int = 10,
    trace_file: str | Path | None = None,
) -> PerformanceProfile:
    """Profiles `inference_function(input)` (or `obj(input)`) under `no_grad`. `trace_file`
    also writes the PyTorch Profiler's Chrome trace there."""
    if isinstance(warmup_runs, bool) or not isinstance(warmup_runs, int) or warmup_runs < 0:
        raise InvalidValueError(f"warmup_runs must be an integer >= 0, got {warmup_runs!r}")
    if isinstance(measured_runs, bool) or not isinstance(measured_runs, int) or measured_runs <= 0:
        raise InvalidValueError(f"measured_runs must be an integer > 0, got {measured_runs!r}")
    fn = inference_function if inference_function is not None else obj
    if not callable(fn):
        raise InvalidValueError(f"ait.profile cannot call a {qualified_type_name(obj)}: pass inference_function")
    trace_path = Path(trace_file).expanduser().resolve() if trace_file is not None else None
    args, kwargs = _call_arguments(input_data)
    regions = discover_regions(obj)
    cap = capture(fn, args, kwargs, regions, warmup_runs, measured_runs, trace_path)
    attribution = Attribution(cap)

    by_name = {(r.kind, r.name): r for r in regions}
    region_rows = []
    for name in attribution.observed[AOT_PREFIX]:
        region = by_name.get((AOT_KIND, name))
        region_rows.append(
            {
                "id": region_id(AOT_KIND, name),
                "name": name,
                "kind": AOT_KIND,
                "module_type": qualified_type_name(region.module) if region else None,
                "wrapper_state": region.state if region else "unknown",
            }
        )
    for name in attribution.observed[UNTUNED_PREFIX]:
        region = by_name.get((UNTUNED_KIND, name))
        region_rows.append(
            {
                "id": region_id(UNTUNED_KIND, name),
                "name": name,
                "kind": UNTUNED_KIND,
                "module_type": qualified_type_name(region.module) if region else None,
            }
        )
    warnings = []
    if attribution.unmapped_aot:
        warnings.append(
            {
                "code": "UNMAPPED_AOT_REGION_EVENTS",
                "source": "core",
                "message": f"{attribution.unmapped_aot} AOT region profiler event(s) could not be mapped "
                "to a profiled run.",
            }
        )
    data = {
        "schema_version": SCHEMA_VERSION,
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "aitune_version": aitune.__version__,
        "config": {
            "warmup_runs": warmup_runs,
            "measured_runs": measured_runs,
            "uses_inference_function": inference_function is not None,
        },
        "target": {"type": qualified_type_name(obj)},
        "input": {"args_count": len(args), "kwargs": sorted(str(k) for k in kwargs)},
        "runs": attribution.runs(cap.wall_times_us),
        "profiler": {"activities": cap.activities, "key_averages": key_averages_summary(cap.key_averages)},
        "regions": region_rows,
        "warnings": warnings,
    }
    return PerformanceProfile(data, trace_path)
