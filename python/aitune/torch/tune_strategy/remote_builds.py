"""What the tuning process does with a candidate record from elsewhere (docs/guide.md, "Tuning on several
GPUs"): `replay` adds the candidate's bookkeeping to the strategy as if it had been built here (its
results entry, gate or profiling numbers, tally and telemetry), and `materialize` serves the
winner's build on the tuning device — from the built artifact where the backend saves one
(TensorRT engines, AOT packages, ONNX models), else by building it again here (JIT backends, from
torch's compile caches the workers filled)."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import TYPE_CHECKING

from aitune.torch.backend.backend import Backend
from aitune.torch.logging_utils import captured_output, format_duration
from aitune.torch.task.correctness import check_correctness
from aitune.torch.tune_data import recorder as tune_data
from aitune.torch.tune_strategy.context import GraphContext
from aitune.torch.tune_strategy.records import CandidateRecord

if TYPE_CHECKING:
    from aitune.torch.tune_strategy.tune_strategy import TuneStrategy


def replay(strategy: TuneStrategy, record: CandidateRecord) -> None:
    strategy.backend_results.extend(record.backend_results)
    if hasattr(strategy, "perf_validation_results"):
        strategy.perf_validation_results.extend(record.perf_validation_results)
    tally, theirs = strategy._tally, record.tally
    tally.unavailable += theirs.unavailable
    tally.failed += theirs.failed
    tally.over_budget += theirs.over_budget
    if tally.failure_log is None:
        tally.failure_log = theirs.failure_log
    if theirs.best_speedup is not None:
        tally.record_speedup(theirs.best_candidate, theirs.best_speedup, theirs.best_detail)
    tune_data.adopt_builds(record.builds)


def materialize(strategy: TuneStrategy, record: CandidateRecord, ctx: GraphContext) -> Backend | None:
    """The record's candidate active on the tuning device and checked there, or None (with the
    reason logged, and counted as a failed candidate)."""
    blueprint = strategy.candidates()[record.index]
    built = record.built
    start = time.perf_counter()
    strategy._log("📦 serving the build of %s from %s on %s", record.describe, record.device, ctx.device)
    try:
        if built is None:
            raise RuntimeError("the worker kept no build of it")
        cls = type(blueprint)
        if built.artifacts and cls.restores_from_artifacts:
            backend = cls.restore(copy.deepcopy(blueprint.config), dict(built.artifacts), ctx.graph, ctx.device)
            if built.input_profile is not None and backend.input_profile() is None:
                backend.saved_input_profile = built.input_profile
        else:
            backend = copy.deepcopy(blueprint)
            build_dir = Path(ctx.cache_dir) / backend.key()
            with captured_output(build_dir / "build.log"):
                backend.build(ctx.module, ctx.graph, copy.deepcopy(ctx.data), ctx.device, build_dir)
        backend.tolerance = blueprint.tolerance
        backend.validated_precision = built.validated_precision
        backend.derived_from = built.derived_from
        check_correctness(backend, ctx.graph, ctx.data, f"{ctx.module_name}.{ctx.graph.name}.{backend.describe()}")
        strategy.check_cuda_graph_capture(backend)
    except Exception as e:  # noqa: BLE001 - the next qualifying candidate is tried
        strategy._log(
            "❌ the build of %s could not be served on %s: %s: %s", record.describe, ctx.device, type(e).__name__, e
        )
        strategy._tally.record_failure(None)
        for result in strategy.backend_results:
            if result.get("backend") == record.describe and result.get("success"):
                result.update({"success": False, "error": f"serving on {ctx.device} failed: {type(e).__name__}: {e}"})
        ctx.module.to(ctx.device)
        return None
    strategy._log("✅ served on %s in %s", ctx.device, format_duration(time.perf_counter() - start))
    return backend
