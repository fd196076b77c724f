"""Strategy base (docs/reference/api.md#strategy-classes, docs/reference/strategies.md): the per-graph pipeline —
optional max-batch search, eager reference outputs, baseline, candidates built from deep copies in their own folders
with their own build.log, structural and numeric checks — and the switches every strategy has."""

from __future__ import annotations

import abc
import copy
import dataclasses
import logging
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from aitune.exceptions import BackendUnavailableError, CudaGraphCaptureError
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.backend.backend import Backend
from aitune.torch.logging_utils import captured_output, format_duration, indent
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.task.correctness import check_correctness
from aitune.torch.task.numeric import check_numeric, effective_precision_class, reference_outputs, tf32_switches
from aitune.torch.task.profiling.config import ProfilingConfig
from aitune.torch.tune_data import report as tune_data
from aitune.torch.tune_strategy.max_batch_search import search_max_batch_size
from aitune.torch.tune_strategy.outcome import CandidateTally
from aitune.torch.tune_strategy.siblings import SiblingBuilds
from aitune.torch.utils.memory import clear_failed_build, is_disk_full, is_out_of_memory, release_memory
from aitune.torch.utils.progress import LiveLine
from aitune.torch.validation import ToleranceSetting, resolve_tolerance

logger = logging.getLogger("aitune")


@dataclasses.dataclass
class GraphContext:
    """Everything one graph's tuning works with."""

    module: torch.nn.Module
    module_name: str
    graph: GraphSpec
    data: list[Sample]
    device: torch.device
    cache_dir: Path
    refs: list[Any] | None = None
    # The batch sizes the caller tuned with that reached this graph (ait.tune's batch_sizes), in
    # ascending order; empty when unknown (JIT mode, where a call's batch size is not known).
    batch_sizes: list[int] = dataclasses.field(default_factory=list)

    @property
    def forward(self) -> Any:
        return getattr(self.module, "_aitune_original_forward", self.module.forward)


def availability(backend: Backend, device: torch.device) -> tuple[bool, str]:
    return backend.availability(device)


class TuneStrategy(abc.ABC):
    def __init__(self, sink: Any = None, profiling_config: ProfilingConfig | None = None) -> None:
        self.sink = sink
        self.profiling_config = profiling_config or ProfilingConfig()
        self.backend_results: list[dict[str, Any]] = []
        self._correctness_check = True
        self._numeric_check = True
        self._tolerance: ToleranceSetting | None = None
        self._find_max_batch_size = True
        self._find_max_batch_size_backend_class: type | None = None
        self._tally = CandidateTally()
        self._siblings = SiblingBuilds([])

    # -- switches (each returns self so they chain) ----------------------------------------
    def enable_correctness_check(self, enable: bool = True) -> TuneStrategy:
        """All of docs/reference/validation.md: structural checks and the numeric comparison."""
        self._correctness_check = enable
        return self

    def enable_numeric_check(self, enable: bool = True) -> TuneStrategy:
        """Only the numeric comparison with eager (docs/reference/validation.md#numeric-comparison), e.g. off for
        stochastic models."""
        self._numeric_check = enable
        return self

    def set_tolerance(self, tolerance: ToleranceSetting) -> TuneStrategy:
        self._tolerance = tolerance
        return self

    def enable_find_max_batch_size(self, enable: bool = True) -> TuneStrategy:
        self._find_max_batch_size = enable
        return self

    def set_find_max_batch_size_default_backend_class(self, backend_class: type) -> TuneStrategy:
        self._find_max_batch_size_backend_class = backend_class
        return self

    def clone(self) -> TuneStrategy:
        return copy.deepcopy(self)

    def prepare(self, device: Any) -> TuneStrategy:
        """Settles what depends on the tuning device (e.g. default candidate lists, which add
        CUDA-graph variants on CUDA). Called before the results-store key is computed and before
        tuning; idempotent."""
        return self

    def _candidates(self) -> list[Backend]:
        """The candidate blueprints in order (their serving siblings share builds)."""
        return list(getattr(self, "backends", None) or [])

    # -- description -----------------------------------------------------------------------
    @abc.abstractmethod
    def _describe_parts(self) -> list[str]: ...

    @abc.abstractmethod
    def to_json_dict(self) -> dict[str, Any]: ...

    def describe(self) -> str:
        """AITune's multi-line form: `name: …`, `description: …`, then the backend(s)."""
        return "\n".join(self._describe_parts())

    def _log(self, message: str, *args: Any) -> None:
        (self.sink or logger).info(message, *args)

    def _log_graph_block(self, ctx: GraphContext, dry_run: bool = False) -> None:
        module = ctx.module
        params = sum(p.numel() for p in module.parameters())
        layers = sum(1 for _ in module.modules())
        precisions = sorted({str(p.dtype) for p in module.parameters()}) or ["none"]
        lines = [
            f"🚀 Tuning graph `{ctx.graph.display_name}` for module `{ctx.module_name}`{' (DRY RUN)' if dry_run else ''}:",
            f"  number of parameters: {params:,}",
            f"  number of layers: {layers}",
            f"  precisions: {', '.join(precisions)}",
            indent(ctx.graph.describe(), 2),
            f"  number of samples: {len(ctx.data)}",
            f"  device: {ctx.device}",
            f"  cache_dir: {ctx.cache_dir}",
            "  strategy:",
            *[f"    {line}" for line in self.describe().splitlines()],
        ]
        self._log("\n".join(lines))

    # -- tuning ----------------------------------------------------------------------------
    def tune(
        self,
        module: torch.nn.Module,
        module_name: str,
        graph: GraphSpec,
        data: list[Sample],
        device: torch.device,
        cache_dir: Path,
    ) -> Backend:
        self.prepare(device)
        with tune_data.graph_span(self, module_name, graph, len(data), device, cache_dir):
            backend = self._tune_graph(module, module_name, graph, data, device, cache_dir)
            speedups = [
                r.get("speedup")
                for r in getattr(self, "perf_validation_results", []) or []
                if r.get("passed") and r.get("backend_description") == backend.describe()
            ]
            tune_data.record_selection(backend, speedups[-1] if speedups else None)
        return backend

    def _tune_graph(
        self,
        module: torch.nn.Module,
        module_name: str,
        graph: GraphSpec,
        data: list[Sample],
        device: torch.device,
        cache_dir: Path,
    ) -> Backend:
        self.backend_results = []
        ctx = GraphContext(
            module,
            module_name,
            graph,
            data,
            torch.device(device),
            Path(cache_dir),
            batch_sizes=sorted(set(getattr(graph, "observed_batch_sizes", ()) or ())),
        )
        self._tally = CandidateTally()
        self._siblings = SiblingBuilds(self._candidates())
        self._log_graph_block(ctx)
        self._log("⏳ Executing strategy %s", type(self).__name__)
        start = time.perf_counter()
        module.to(ctx.device)
        if self._find_max_batch_size and graph.has_batch_axis() and data:
            self._search_max_batch_size(ctx)
        if self._correctness_check and self._numeric_check and data:
            graph.reference_outputs = []
            ctx.refs = reference_outputs(ctx.forward, data, graph.reference_outputs)
        self._pre_tune(ctx)
        try:
            backend = self._tune_candidates(ctx)
        finally:
            self._siblings.release()  # derived siblings that were never tried
        self._post_tune(ctx, backend)
        self._log("⏱️ Tune `%s`: completed in %s", type(self).__name__, format_duration(time.perf_counter() - start))
        return backend

    def _tune_candidates(self, ctx: GraphContext) -> Backend:
        """Under ait.tune(devices=[...]) a strategy that decides from records (`_decide`)
        evaluates its candidates in the device pool's worker processes and decides here
        (multi_device/, docs/guide.md "Tuning on several GPUs"); otherwise, or with fewer than
        two candidates, they run one after another in this process."""
        from aitune.torch.multi_device.pool import active_pool

        pool = active_pool()
        if pool is not None and len(self._candidates()) > 1 and self._decides_from_records():
            return pool.tune(self, ctx)
        return self._tune(ctx)

    def _decides_from_records(self) -> bool:
        """True when `_decide` implements this class's `_tune` rule: a subclass that overrides
        `_tune` below the class defining `_decide` runs its own `_tune`, sequentially."""
        mro = type(self).__mro__
        decide_owner = next((c for c in mro if "_decide" in c.__dict__), None)
        tune_owner = next(c for c in mro if "_tune" in c.__dict__)
        return decide_owner is not None and issubclass(decide_owner, tune_owner)

    def tune_dry_run(
        self,
        module: torch.nn.Module,
        module_name: str,
        graph: GraphSpec,
        data: list[Sample],
        device: torch.device,
        cache_dir: Path,
    ) -> None:
        self._log_graph_block(
            GraphContext(module, module_name, graph, data, torch.device(device), Path(cache_dir)), dry_run=True
        )

    def _pre_tune(self, ctx: GraphContext) -> None:
        pass

    def _post_tune(self, ctx: GraphContext, backend: Backend) -> None:
        pass

    @abc.abstractmethod
    def _tune(self, ctx: GraphContext) -> Backend: ...

    # -- shared steps ----------------------------------------------------------------------
    def _eager_backend(self) -> Backend:
        cls = self._find_max_batch_size_backend_class or TorchEagerBackend
        return cls()

    def _search_max_batch_size(self, ctx: GraphContext) -> None:
        """Sweeps an eager backend over the profiling batch sizes within the time budget and
        extends the graph's max shapes to the best-throughput batch size (max_batch_search.py)."""
        search_max_batch_size(self._eager_backend(), ctx, self.profiling_config, self._log)

    def _skip(self, blueprint: Backend, reason: str) -> None:
        self._log("⏭️ backend skipped: %s — %s", blueprint.describe(), reason)
        self.backend_results.append({"backend": blueprint.describe(), "success": False, "skipped": reason})
        tune_data.record_skipped(blueprint, reason)

    def _build_and_validate(self, blueprint: Backend, ctx: GraphContext, raise_on_failure: bool) -> Backend | None:
        """Builds a deep copy of `blueprint` in `<cache_dir>/<key>/` — or serves a serving
        sibling's build the other way (siblings.py) — and checks it. On failure the traceback goes
        to build.log, the module returns to the tuning device, and the error is re-raised or None
        returned. An unavailable backend, or one whose sibling's build failed, is skipped (or
        raises)."""
        available, reason = availability(blueprint, ctx.device)
        self._siblings.start(blueprint)
        if not available:
            if raise_on_failure:
                raise BackendUnavailableError(reason)
            self._tally.unavailable += 1
            self._skip(blueprint, reason)
            return None
        reason = self._siblings.skip_reason(blueprint)
        if reason is not None and not raise_on_failure:
            self._tally.failed += 1
            self._skip(blueprint, reason)
            return None
        backend = self._siblings.take(blueprint)
        derived = backend is not None
        if backend is None:
            backend = copy.deepcopy(blueprint)
        build_dir = ctx.cache_dir / backend.key()
        log_file = build_dir / "build.log"
        self._log(
            "🤖 backend: %s%s", backend.describe(), f" (serves the build of {backend.derived_from})" if derived else ""
        )
        self._log("🔄 in progress...please wait")
        start = time.perf_counter()
        result: dict[str, Any] = {"backend": backend.describe(), "success": False}
        if derived:
            result["shared_build_of"] = backend.derived_from
        self.backend_results.append(result)
        tune_data.begin_build(backend, log_file, build_dir, result)
        building = not derived
        try:
            if derived:
                build_dir.mkdir(parents=True, exist_ok=True)
                log_file.write_text(f"No build: serves the build of {backend.derived_from}.\n")
            else:
                with LiveLine(f"🔄 {backend.describe()}: building"), captured_output(log_file):
                    try:
                        backend.build(ctx.module, ctx.graph, copy.deepcopy(ctx.data), ctx.device, build_dir, log_file)
                    except CudaGraphCaptureError:
                        building = False  # the build itself is complete; only its serving failed
                        raise
            building = False
            self._siblings.built(backend)
            result["build_duration_s"] = round(time.perf_counter() - start, 3)
            tune_data.record_step("build", time.perf_counter() - start)
            self._log("✅ backend built")
            if self._correctness_check:
                self._validate(backend, ctx, result)
            self.check_cuda_graph_capture(backend)
        except Exception as e:
            if is_disk_full(e):  # nothing half-written stays, and the space goes to the next candidate
                clear_failed_build(build_dir, keep=log_file)
            try:
                build_dir.mkdir(parents=True, exist_ok=True)
                with open(log_file, "a") as f:
                    f.write("\n" + "".join(traceback.format_exception(e)))
            except OSError as log_error:  # e.g. the disk is full: the failure is still this candidate's
                logger.debug("Could not append to %s: %s", log_file, log_error)
            first_line = (str(e).strip().splitlines() or [""])[0]
            self._log("❌ backend failed (log file: %s): %s: %s", log_file, type(e).__name__, first_line)
            result["error"] = f"{type(e).__name__}: {e}"
            tune_data.end_build(False, e)
            if building:
                self._siblings.build_failed(blueprint, e)
            else:
                self._siblings.before_release(backend)
            self._tally.record_failure(log_file)
            backend.deactivate()
            ctx.module.to(ctx.device)
            if raise_on_failure:
                if getattr(e, "log_path", "absent") is None:
                    e.log_path = log_file  # type: ignore[attr-defined]
                raise
            if is_out_of_memory(e):  # what it held goes before the next candidate starts
                del backend
                release_memory(e)
                self._log("⏭️ %s ran out of memory: memory released, trying the next candidate", blueprint.describe())
            return None
        finally:
            self._log("⏱️ completed in %s", format_duration(time.perf_counter() - start))
        result["success"] = True
        tune_data.end_build(True)
        return backend

    def _validate(self, backend: Backend, ctx: GraphContext, result: dict[str, Any]) -> None:
        """Structural checks, then the numeric comparison with eager (docs/reference/validation.md). The precision
        class that judged the outputs, and the TF32 switches in force, stay with the backend: a
        checkpoint records them so every later check (aitune run --check) uses the same class."""
        description = f"{ctx.module_name}.{ctx.graph.name}.{backend.describe()}"
        step_start = time.perf_counter()
        with LiveLine(f"🔍 {backend.describe()}: checking outputs against eager"):
            check_correctness(backend, ctx.graph, ctx.data, description)
        tune_data.record_step("correctness_check", time.perf_counter() - step_start)
        cls = effective_precision_class(backend, ctx.module, ctx.device)
        backend.validated_precision = {"precision_class": cls, "tf32": tf32_switches()}
        if self._numeric_check and ctx.refs is not None:
            tolerance = resolve_tolerance(cls, backend.tolerance, self._tolerance)
            step_start = time.perf_counter()
            with LiveLine(f"🔍 {backend.describe()}: comparing outputs with eager"):
                summary = check_numeric(backend.infer, ctx.graph, ctx.data, ctx.refs, tolerance, cls)
            tune_data.record_step("numeric_check", time.perf_counter() - step_start)
            tune_data.record_correctness(summary)
            result["correctness"] = {"precision_class": cls, "passed": summary.passed, **summary.worst}
        self._log("✅ backend validated")

    def check_cuda_graph_capture(self, backend: Backend) -> None:
        """Raises CudaGraphCaptureError when a CUDA-graph capture of the candidate's calls failed:
        the shared runner then serves those calls without a graph, so the candidate is not what it
        claims to be. Its plain sibling (same build) remains a candidate."""
        failure = backend.cuda_graph_capture_failure()
        if failure is not None:
            raise CudaGraphCaptureError(f"CUDA graph capture failed for {backend.describe()}: {failure}")
