"""The checks a built candidate passes before it is measured (docs/reference/validation.md), as
`TuneStrategy._validate` runs them: the structural checks, the numeric comparison with eager, then
a strategy's own `check_correctness` hook."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from aitune.torch.task.correctness import check_correctness
from aitune.torch.task.numeric import check_numeric, effective_precision_class, tf32_switches
from aitune.torch.task.precise_reference import native_precision_class
from aitune.torch.tune_data import recorder as tune_data
from aitune.torch.utils.progress import LiveLine
from aitune.torch.validation import ToleranceSetting, resolve_tolerance

if TYPE_CHECKING:
    from aitune.torch.backend.backend import Backend
    from aitune.torch.graph.graph_spec import GraphSpec, Sample
    from aitune.torch.tune_strategy.context import GraphContext

# A strategy's own metric: (backend, module name, graph, samples); raises to reject the candidate.
UserCheck = Callable[["Backend", str, "GraphSpec", "list[Sample]"], None]


def validate_candidate(
    backend: Backend,
    ctx: GraphContext,
    result: dict[str, Any],
    numeric_check: bool,
    tolerance: ToleranceSetting | None,
    user_check: UserCheck | None,
) -> None:
    """Structural checks, then (with `numeric_check` and reference outputs) the numeric comparison,
    then `user_check`. The precision class that judged the outputs, and the TF32 switches in
    force, stay with the backend: a checkpoint records them so every later check (aitune run
    --check) uses the same class. `result` (the candidate's telemetry row) gets the verdict."""
    description = f"{ctx.module_name}.{ctx.graph.name}.{backend.describe()}"
    step_start = time.perf_counter()
    with LiveLine(f"🔍 {backend.describe()}: checking outputs against eager"):
        check_correctness(backend, ctx.graph, ctx.data, description)
    tune_data.record_step("correctness_check", time.perf_counter() - step_start)
    cls = effective_precision_class(backend, ctx.module, ctx.device)
    backend.validated_precision = {"precision_class": cls, "tf32": tf32_switches()}
    if numeric_check and ctx.refs is not None:
        judged_by = resolve_tolerance(cls, backend.tolerance, tolerance)
        step_start = time.perf_counter()
        with LiveLine(f"🔍 {backend.describe()}: comparing outputs with eager"):
            # The noise bound applies to a candidate computing the model's own precision.
            native = cls == native_precision_class(ctx.module, ctx.device)
            summary = check_numeric(backend.infer, ctx.graph, ctx.data, ctx.refs, judged_by, cls, native)
        tune_data.record_step("numeric_check", time.perf_counter() - step_start)
        tune_data.record_correctness(summary)
        result["correctness"] = {"precision_class": cls, "passed": summary.passed, **summary.worst}
    if user_check is not None:
        step_start = time.perf_counter()
        user_check(backend, ctx.module_name, ctx.graph, ctx.data)
        tune_data.record_step("user_correctness_check", time.perf_counter() - step_start)
