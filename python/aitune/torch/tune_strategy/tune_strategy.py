"""Strategy base (docs/reference/api.md#strategy-classes, docs/reference/strategies.md): the per-graph pipeline —
optional max-batch search, eager reference outputs, baseline, candidates built from deep copies in their own folders
with their own build.log, structural and numeric checks — and the switches every strategy has."""

from __future__ import annotations

import abc
import copy
import logging
import time
import traceback
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import torch

from aitune.exceptions import BackendUnavailableError, CudaGraphCaptureError, TuningBudgetExceeded
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.backend.backend import Backend, availability
from aitune.torch.logging_utils import captured_output, format_duration, indent
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.task.numeric import reference_outputs
from aitune.torch.task.profiling.config import ProfilingConfig
from aitune.torch.tune_data import recorder as tune_data
from aitune.torch.tune_strategy.max_batch_search import search_max_batch_size
from aitune.torch.tune_data import recorder as telemetry
from aitune.torch.tune_strategy.budget import build_deadline
from aitune.torch.tune_strategy.budget_steps import BudgetSteps
from aitune.torch.tune_strategy.candidate_checks import validate_candidate
from aitune.torch.tune_strategy.context import Baseline, GraphContext, installed_executor
from aitune.torch.tune_strategy.outcome import CandidateTally
from aitune.torch.tune_strategy.records import BuiltCandidate, CandidateRecord
from aitune.torch.tune_strategy.siblings import SiblingBuilds
from aitune.torch.utils.memory import clear_failed_build, is_disk_full, is_out_of_memory, release_memory
from aitune.torch.utils.progress import CandidateProgress, LiveLine, set_candidate
from aitune.torch.validation import ToleranceSetting

logger = logging.getLogger("aitune")

__all__ = ["Baseline", "GraphContext", "TuneStrategy", "availability"]


def checked_budget_s(budget_s: object) -> float | None:
    """A strategy's `budget_s=`: seconds > 0, or None for the config's (docs/reference/strategies.md#tuning-budget)."""
    if budget_s is None:
        return None
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not budget_s > 0:
        raise ValueError(f"budget_s must be a number of seconds > 0 or None, got {budget_s!r}")
    return float(budget_s)


class TuneStrategy(BudgetSteps, abc.ABC):
    # True for the strategies that walk a list of candidates within the tuning budget (FirstWins,
    # the profiling strategies); OneBackend and custom strategies are not budgeted.
    _walks_candidates: ClassVar[bool] = False

    def __init__(self, sink: logging.Logger | None = None, profiling_config: ProfilingConfig | None = None) -> None:
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
        self._deferred_search: GraphContext | None = None  # a max-batch search not run yet
        self.budget_s: float | None = None  # the strategy's own tuning budget; None: config.tuning_budget_s

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

    def prepare(self, device: torch.device | str) -> TuneStrategy:
        """Settles what depends on the tuning device (e.g. default candidate lists, which add
        CUDA-graph variants on CUDA). Called before the results-store key is computed and before
        tuning; idempotent."""
        return self

    def candidates(self) -> list[Backend]:
        """The candidate blueprints in order (their serving siblings share builds); a strategy
        with a `backends` list needs not override it."""
        return list(getattr(self, "backends", None) or [])

    # -- what the results store and the tuning report read ------------------------------------
    @property
    def tolerance(self) -> ToleranceSetting | None:
        """The tolerance set with set_tolerance(), or None for each precision class's default."""
        return self._tolerance

    @property
    def checks_numerics(self) -> bool:
        """True when candidates are compared with eager (both checks on): the eager reference
        outputs are then recorded, also for a stored result that is reused."""
        return self._correctness_check and self._numeric_check

    @property
    def performance_validation(self) -> bool:
        """True when a candidate must beat the eager baseline (the strategies with a gate)."""
        return False

    def settings(self) -> dict[str, Any]:
        """The strategy's scalar switches by attribute name, for the results-store key
        (docs/reference/tuning.md#reusing-results): every plain value the object holds except its
        per-graph bookkeeping, so a custom strategy's own parameters count too."""
        per_graph = ("sink", "backend_results", "perf_validation_results")
        settings = {
            k: v
            for k, v in sorted(vars(self).items())
            if k not in per_graph
            and not isinstance(v, Backend)
            and (v is None or isinstance(v, (bool, int, float, str, type)))
        }
        if settings.get("budget_s", 0) is None:
            del settings["budget_s"]  # no budget: the keys stored before budgets existed stay valid
        return settings

    def configured_backends(self) -> list[Backend]:
        """Every Backend the strategy holds as an attribute or list of them (its candidates, a
        custom strategy's own), for the results-store key."""
        found: list[Backend] = []
        for value in vars(self).values():
            if isinstance(value, Backend):
                found.append(value)
            elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Backend) for v in value):
                found.extend(value)
        return found

    def selection_rule(self) -> str:
        """How the strategy picks a graph's backend, in one sentence (the tuning report)."""
        return type(self).__name__

    # -- description -----------------------------------------------------------------------
    @abc.abstractmethod
    def _describe_parts(self) -> list[str]: ...

    @abc.abstractmethod
    def to_json_dict(self) -> dict[str, Any]: ...

    def describe(self) -> str:
        """AITune's multi-line form: `name: …`, `description: …`, then the backend(s)."""
        return "\n".join(self._describe_parts())

    def _log(self, message: str, *args: object) -> None:
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
            executor=installed_executor(),
            budget=self._graph_budget(),
        )
        self._tally = CandidateTally()
        self._siblings = SiblingBuilds(self.candidates())
        self._log_graph_block(ctx)
        self._log("⏳ Executing strategy %s", type(self).__name__)
        self._log_budget(ctx)
        start = time.perf_counter()
        module.to(ctx.device)
        self._deferred_search = None
        if self._find_max_batch_size and graph.has_batch_axis() and data:
            if self._searches_lazily() and ctx.executor is None:
                self._deferred_search = ctx  # run before the first candidate that needs it
            else:
                self._search_max_batch_size(ctx)
        if self._correctness_check and self._numeric_check and data:
            graph.reference_outputs = []
            ctx.refs = reference_outputs(
                ctx.forward, data, graph.reference_outputs, module=ctx.module, device=ctx.device, graph_name=graph.name
            )
        self._pre_tune(ctx)
        try:
            backend = self._tune_candidates(ctx)
        finally:
            self._siblings.release()  # derived siblings that were never tried
            set_candidate(None)
            if ctx.budget is not None:
                telemetry.finish_budget(ctx.budget.left_s())
        self._post_tune(ctx, backend)
        self._log("⏱️ Tune `%s`: completed in %s", type(self).__name__, format_duration(time.perf_counter() - start))
        return backend

    def _tune_candidates(self, ctx: GraphContext) -> Backend:
        """With an executor in the context (the device pool under ait.tune(devices=[...]),
        multi_device/, docs/guide.md "Tuning on several GPUs") a strategy that decides from records
        has its candidates evaluated there and decides here; otherwise, or with fewer than two
        candidates, they run one after another in this process (`_tune`)."""
        if ctx.executor is not None and len(self.candidates()) > 1 and self._decides_from_records():
            records = ctx.executor.evaluate(self, ctx)
            if records is not None:
                return self.decide(ctx, records)
        return self._tune(ctx)

    def _decides_from_records(self) -> bool:
        """True when `decide` implements this class's `_tune` rule: a subclass that overrides
        `_tune` below the class defining `decide` runs its own `_tune`, sequentially."""
        mro = type(self).__mro__
        decide_owner = next(c for c in mro if "decide" in c.__dict__)
        tune_owner = next(c for c in mro if "_tune" in c.__dict__)
        return decide_owner is not TuneStrategy and issubclass(decide_owner, tune_owner)

    # -- the contract an executor uses (context.RecordingStrategy, docs/design.md#the-strategy-contract) --
    def start_graph(self, ctx: GraphContext) -> None:
        """Readies the strategy for evaluate() on `ctx.device`: fresh bookkeeping and the eager
        baseline there. tune() does the same as part of its pipeline; a pool worker calls this."""
        self.backend_results = []
        self._tally = CandidateTally()
        self._pre_tune(ctx)

    def baseline(self) -> Baseline | None:
        """The eager baseline measured by start_graph() (or tune()), or None without a gate."""
        return None

    def evaluate(self, indices: Sequence[int], ctx: GraphContext) -> list[CandidateRecord]:
        """Evaluates the candidates at `indices` (serving siblings come as one group and share a
        build, as in one process), each against this device's baseline, and releases them: one
        record each, with what decide() needs and the bookkeeping replayed in the tuning process."""
        candidates = self.candidates()
        self._siblings = SiblingBuilds([candidates[i] for i in indices])
        try:
            return [self._evaluate_candidate(i, candidates[i], ctx) for i in indices]
        finally:
            self._siblings.release()

    def settled(self, records: Mapping[int, CandidateRecord]) -> bool:
        """True when the records so far decide the graph, so no further candidate need start."""
        return False

    def decide(self, ctx: GraphContext, records: list[CandidateRecord]) -> Backend:
        """The backend to serve the graph with, from every candidate's record (candidate order),
        by the same rule `_tune` applies; a strategy that does not define it is tuned sequentially."""
        raise NotImplementedError(f"{type(self).__name__} decides sequentially (_tune), not from records")

    def end_graph(self) -> None:
        """Releases what start_graph() holds (the eager baseline)."""

    def _evaluate_candidate(self, index: int, blueprint: Backend, ctx: GraphContext) -> CandidateRecord:
        self.backend_results = []
        self._tally = CandidateTally()
        self._reset_candidate_results()
        builds_before = len(telemetry.current_builds())
        record = CandidateRecord(index, str(ctx.device), blueprint.describe())
        backend = self._build_and_validate(blueprint, ctx, raise_on_failure=False)
        verdict = (
            self._measured_within_budget(backend, ctx, lambda: self._measure_candidate(backend, ctx))
            if backend is not None
            else None
        )
        qualified = self._record_verdict(record, verdict)
        if backend is not None and backend.is_active:
            if qualified:
                artifacts = {k: a.path for k, a in backend._artifacts().items() if a is not None}
                record.built = BuiltCandidate(
                    artifacts, backend.input_profile(), backend.validated_precision, backend.derived_from
                )
            self._siblings.before_release(backend)
            backend.deactivate()
            ctx.module.to(ctx.device)
        for result in self.backend_results:
            result["device"] = str(ctx.device)
        record.backend_results = list(self.backend_results)
        record.perf_validation_results = list(getattr(self, "perf_validation_results", []) or [])
        record.tally = self._tally
        record.builds = list(telemetry.current_builds()[builds_before:])
        return record

    def _reset_candidate_results(self) -> None:
        """Clears the per-candidate results a record carries (evaluate())."""

    def _measure_candidate(self, backend: Backend, ctx: GraphContext) -> object:
        """The verdict on a built, validated candidate: the gate, or a measured point."""
        raise NotImplementedError(f"{type(self).__name__} does not measure candidates for evaluate()")

    def _record_verdict(self, record: CandidateRecord, verdict: object) -> bool:
        """Puts `verdict` (None: the candidate failed earlier) into `record`; True when the
        candidate qualified, so its build is kept for decide()."""
        raise NotImplementedError(f"{type(self).__name__} does not record verdicts for evaluate()")

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

    def _searches_lazily(self) -> bool:
        """True when the max-batch search may wait for the first candidate that is not a JIT
        backend (docs/reference/strategies.md#max-batch-search): only ahead-of-time artefacts
        (TensorRT profiles, AOTInductor and Torch-TensorRT AOT exports, ONNX models) are built for
        the graph's max shapes, and a strategy whose measurements use the max (the profiling
        sweep) searches first."""
        return False

    def _search_max_batch_size(self, ctx: GraphContext) -> None:
        """Sweeps an eager backend over the profiling batch sizes within the time budget and
        extends the graph's max shapes to the best-throughput batch size (max_batch_search.py)."""
        search_max_batch_size(self._eager_backend(), ctx, self.profiling_config, self._log)

    def _skip(self, blueprint: Backend, reason: str, over_budget: bool = False) -> None:
        self._log("⏭️ backend skipped: %s — %s", blueprint.describe(), reason)
        result = {"backend": blueprint.describe(), "success": False, "skipped": reason}
        self.backend_results.append({**result, "over_budget": True} if over_budget else result)
        tune_data.record_skipped(blueprint, reason)
        if over_budget:
            telemetry.mark_over_budget("skipped", blueprint.describe())

    def _show_candidate(self, blueprint: Backend, ctx: GraphContext) -> None:
        """`candidate n/m` (and the time left) on the live progress line from now on."""
        candidates = self.candidates()
        # A custom strategy's own blueprint (not among candidates()) is numbered by the attempts so far.
        number = next((i + 1 for i, c in enumerate(candidates) if c is blueprint), len(self.backend_results) + 1)
        deadline = ctx.budget.deadline_s if ctx.budget is not None else None
        set_candidate(CandidateProgress(number, max(len(candidates), number), deadline))

    def _build_and_validate(self, blueprint: Backend, ctx: GraphContext, raise_on_failure: bool) -> Backend | None:
        """Builds a deep copy of `blueprint` in `<cache_dir>/<key>/` — or serves a serving
        sibling's build the other way (siblings.py) — and checks it. On failure the traceback goes
        to build.log, the module returns to the tuning device, and the error is re-raised or None
        returned. An unavailable backend, or one whose sibling's build failed, is skipped (or
        raises)."""
        available, reason = availability(blueprint, ctx.device)
        self._show_candidate(blueprint, ctx)
        shares_a_build = self._siblings.shares_a_build(blueprint)
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
        reason = None if ctx.budget is None else ctx.budget.skip_reason(blueprint.expected_build_cost(), shares_a_build)
        if reason is not None and not raise_on_failure:
            self._tally.over_budget += 1
            self._skip(blueprint, reason, over_budget=True)
            return None
        backend = self._siblings.take(blueprint)
        derived = backend is not None
        if backend is None:
            backend = copy.deepcopy(blueprint)
            if self._deferred_search is not None and not backend.is_jit:
                deferred, self._deferred_search = self._deferred_search, None
                self._search_max_batch_size(deferred)
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
                with (
                    LiveLine(f"🔄 {backend.describe()}: building"),
                    captured_output(log_file),
                    build_deadline(ctx.budget, backend.describe()),
                ):
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
                # The checks' first calls can compile (a JIT backend's shapes not built yet): under
                # the same deadline, and counted in what the build cost.
                with build_deadline(ctx.budget, backend.describe(), during="its checks"):
                    self._validate(backend, ctx, result)
            if ctx.budget is not None and not derived:
                ctx.budget.scale.add(blueprint.expected_build_cost(), time.perf_counter() - start)
            self.check_cuda_graph_capture(backend)
        except TuningBudgetExceeded as e:
            self._abandon(backend, ctx, e, log_file, result)
            return None
        except Exception as e:
            if ctx.budget is not None and ctx.budget.fired:  # a compiler re-raised the interrupt as its own
                self._abandon(backend, ctx, e, log_file, result)
                return None
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
        """The checks of docs/reference/validation.md (candidate_checks.py), with this strategy's
        switches, tolerance and, when a subclass defines one, its check_correctness metric."""
        overridden = type(self).check_correctness is not TuneStrategy.check_correctness
        user_check = self.check_correctness if overridden else None
        validate_candidate(backend, ctx, result, self._numeric_check, self._tolerance, user_check)
        self._log("✅ backend validated")

    def check_correctness(self, backend: Backend, name: str, graph_spec: GraphSpec, data: list[Sample]) -> None:
        """AITune's hook for a metric of your own (docs/reference/validation.md#your-own-metric): a
        subclass judges the built candidate (`backend.infer(...)` on `data`, the stored samples) and
        raises to reject it, which fails the candidate like any correctness failure. It runs after
        aitune's checks; with `enable_numeric_check(False)` it replaces the numeric comparison. The
        base does nothing."""

    def check_cuda_graph_capture(self, backend: Backend) -> None:
        """Raises CudaGraphCaptureError when a CUDA-graph capture of the candidate's calls failed:
        the shared runner then serves those calls without a graph, so the candidate is not what it
        claims to be. Its plain sibling (same build) remains a candidate."""
        failure = backend.cuda_graphs.capture_failure()
        if failure is not None:
            raise CudaGraphCaptureError(f"CUDA graph capture failed for {backend.describe()}: {failure}")
