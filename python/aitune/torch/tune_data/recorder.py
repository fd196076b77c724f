"""The tuning report's recorder (docs/reference/tuning.md#telemetry-and-report): spans for the run, each
module, each graph and each backend build, which fill in the model (model.py) as tuning goes and
flush it through the writer (writer.py) at every span boundary. Always on and best effort."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping

import aitune
from aitune.torch.checkpoint.fingerprint import current_fingerprint
from aitune.torch.config import config
from aitune.torch.tune_data import writer
from aitune.torch.tune_data.model import BuildReport, GraphReport, ModuleReport, RunReport, error_dict, json_safe

if TYPE_CHECKING:
    import torch

    from aitune.torch.graph.graph_spec import GraphSpec, TensorsSpec
    from aitune.torch.tune_data.subjects import ReportedBackend, ReportedStrategy


# -- the current run -------------------------------------------------------------------------
class _State:
    run: RunReport | None = None
    module: ModuleReport | None = None
    graph: GraphReport | None = None
    build: BuildReport | None = None


_state = _State()


def current_run() -> RunReport | None:
    return _state.run


def snapshot_tuning_data(path: str | os.PathLike | None = None) -> Path | None:
    """Writes the current (or last) run's telemetry JSON now; returns the path, or None
    when there is no run yet."""
    run = _state.run or _last_run[0]
    if run is None:
        return None
    return writer.write_json(run, Path(path) if path is not None else None)


_last_run: list[RunReport | None] = [None]


def _flush() -> None:
    if _state.run is not None:
        snapshot_tuning_data()


def _new_run(mode: str) -> RunReport:
    version = getattr(aitune, "__version__", "")
    run = RunReport(
        mode=mode,
        aitune_version=version,
        started_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        _start=time.perf_counter(),
    )
    try:
        run.config = config.to_dict()
    except Exception as e:  # noqa: BLE001
        run.config = {"error": f"{type(e).__name__}: {e}"}
    try:
        run.fingerprint = current_fingerprint()
    except Exception as e:  # noqa: BLE001
        run.fingerprint = {"error": f"{type(e).__name__}: {e}"}
    return run


@contextlib.contextmanager
def run_span(mode: str = "ahead_of_time", write_html: bool = True) -> Iterator[RunReport]:
    """One ait.tune call. Nested run spans join the outer one."""
    if _state.run is not None:
        yield _state.run
        return
    run = _new_run(mode)
    _state.run, _state.module, _state.graph, _state.build = run, None, None, None
    writer.reset_failure_log()
    try:
        _flush()  # inside: a full disk (DiskSpaceError) must not leave this run behind as the current one
        yield run
    except BaseException as e:
        run.exception = error_dict(e)
        raise
    finally:
        run.duration_s = round(time.perf_counter() - run._start, 3)
        try:
            _flush()
            if write_html:
                writer.write_html(run)
        finally:
            _last_run[0] = run
            _state.run, _state.module, _state.graph, _state.build = None, None, None, None


@contextlib.contextmanager
def module_span(name: str) -> Iterator[ModuleReport]:
    with contextlib.ExitStack() as stack:
        if _state.run is None:
            stack.enter_context(run_span("module.tune"))
        module = ModuleReport(name=name, _start=time.perf_counter())
        _state.run.modules.append(module)  # type: ignore[union-attr]
        previous = _state.module
        _state.module = module
        _flush()
        try:
            yield module
        except BaseException as e:
            if getattr(e, "outcome", None) is None:  # a kept-eager outcome is not an error
                module.exception = error_dict(e)
            raise
        finally:
            module.duration_s = round(time.perf_counter() - module._start, 3)
            _state.module = previous
            _flush()


def _spec_rows(spec: TensorsSpec) -> dict[str, list[dict[str, str]]]:
    tensors = [
        {
            "access_path": t.access_path,
            "semantic_path": str(t.semantic_path),
            "shape": str(t.spec.shape),
            "min_shape": str(t.spec.min_shape),
            "max_shape": str(t.spec.max_shape),
            "dtype": ", ".join(map(str, t.dtypes)),
        }
        for t in getattr(spec, "tensors", [])
    ]
    other = [
        {"access_path": c.access_path, "semantic_path": str(c.semantic_path), "value": repr(c.value)}
        for c in getattr(spec, "constants", [])
    ]
    return {"tensors": tensors, "other": other}


def selection_rule(strategy: ReportedStrategy) -> str:
    """How `strategy` (a TuneStrategy) picks a graph's backend, for the report."""
    return strategy.selection_rule()


@contextlib.contextmanager
def graph_span(
    strategy: ReportedStrategy,
    module_name: str,
    graph: GraphSpec | str,
    num_samples: int = 0,
    device: torch.device | str = "",
    cache_dir: str | os.PathLike = "",
) -> Iterator[GraphReport]:
    with contextlib.ExitStack() as stack:
        if _state.module is None or _state.module.name != module_name:
            stack.enter_context(module_span(module_name))
        report = GraphReport(
            name=str(getattr(graph, "name", graph)),
            display_name=str(getattr(graph, "display_name", getattr(graph, "name", graph))),
            num_samples=num_samples,
            device=str(device),
            cache_dir=str(cache_dir),
            strategy=type(strategy).__name__,
            _start=time.perf_counter(),
        )
        with contextlib.suppress(Exception):
            report.input_spec = _spec_rows(graph.input_spec)
        with contextlib.suppress(Exception):
            report.output_spec = _spec_rows(graph.output_spec)
        with contextlib.suppress(Exception):
            report.strategy_description = strategy.describe()
        with contextlib.suppress(Exception):
            report.strategy_config = strategy.to_json_dict()
        with contextlib.suppress(Exception):
            report.selection_rule = selection_rule(strategy)
        _state.module.graphs.append(report)  # type: ignore[union-attr]
        _state.graph, _state.build = report, None
        _flush()
        try:
            yield report
        except BaseException as e:
            if getattr(e, "outcome", None) is None:  # a kept-eager outcome is not an error
                report.exception = error_dict(e)
            raise
        finally:
            report.duration_s = round(time.perf_counter() - report._start, 3)
            with contextlib.suppress(Exception):
                report.perf_validation_results = [  # result objects (strategy_results.py) as plain dicts
                    r.to_dict() if hasattr(r, "to_dict") else dict(r)
                    for r in getattr(strategy, "perf_validation_results", []) or []
                ]
            _state.graph, _state.build = None, None
            _flush()


def record_selection(backend: ReportedBackend, speedup: float | None = None) -> None:
    graph = _state.graph
    if graph is None:
        return
    with contextlib.suppress(Exception):
        graph.selected_backend = backend.describe()
    if speedup is not None:
        graph.speedup = speedup
    if graph.outcome is None:
        graph.outcome = "tuned"


def record_outcome(outcome: str, message: str = "") -> None:
    """The graph's outcome ("kept_eager", "reused", ...) and its one-line explanation."""
    graph = _state.graph
    if graph is None:
        return
    graph.outcome = outcome
    graph.outcome_message = message
    _flush()


def record_module_outcome(name: str, outcome: str) -> None:
    run = _state.run
    if run is None:
        return
    for module in reversed(run.modules):
        if module.name == name:
            module.outcome = outcome
            break
    _flush()


def module_outcome(name: str) -> str | None:
    """The outcome recorded for module `name` in the current (or last) run."""
    run = _state.run or _last_run[0]
    if run is None:
        return None
    for module in reversed(run.modules):
        if module.name == name:
            return module.outcome
    return None


def record_max_batch_search(stopped_by: str, elapsed_s: float) -> None:
    graph = _state.graph
    if graph is not None:
        graph.max_batch_search = {"stopped_by": stopped_by, "elapsed_s": round(elapsed_s, 3)}


# -- builds ----------------------------------------------------------------------------------
def begin_build(
    backend: ReportedBackend,
    log_file: str | os.PathLike | None = None,
    build_dir: str | os.PathLike | None = None,
    result: dict[str, object] | None = None,
) -> BuildReport | None:
    """Opens a build in the current graph (None outside a graph span). `result` is the
    strategy's backend_results dict, copied into the report when the build ends."""
    graph = _state.graph
    if graph is None:
        return None
    build = BuildReport(
        backend=_describe(backend),
        log_file=str(log_file) if log_file else None,
        build_dir=str(build_dir) if build_dir else None,
        _start=time.perf_counter(),
    )
    with contextlib.suppress(Exception):
        build.config = (
            dict(backend.config.to_dict()) if hasattr(backend.config, "to_dict") else dataclasses.asdict(backend.config)
        )
    with contextlib.suppress(Exception):
        build.key = backend.key()
    if result is not None:
        build.result = result
    graph.builds.append(build)
    _state.build = build
    _flush()
    return build


def adopt_builds(builds: list[BuildReport]) -> None:
    """Builds made in a multi-device worker process (multi_device/), into the current graph."""
    graph = _state.graph
    if graph is None or not builds:
        return
    graph.builds.extend(builds)
    _state.build = None
    _flush()


def _describe(backend: ReportedBackend) -> str:
    try:
        return backend.describe()
    except Exception:  # noqa: BLE001
        return str(backend)


def current_builds() -> list[BuildReport]:
    """The builds recorded so far for the graph being tuned (empty outside a graph span)."""
    return _state.graph.builds if _state.graph is not None else []


def record_skipped(backend: ReportedBackend, reason: str) -> None:
    build = begin_build(backend)
    if build is not None:
        build.skipped = reason
        build.duration_s = 0.0
        _state.build = None
        _flush()


def record_budget(info: Mapping[str, object]) -> None:
    """The tuning budget of the graph being tuned (docs/reference/tuning.md#telemetry-and-report): budget,
    source, time left at its start and the candidate order; finish_budget() adds what it cost."""
    if _state.graph is not None:
        _state.graph.budget = dict(info)
        _flush()


def mark_over_budget(kind: str, backend_description: str, reason: str | None = None) -> None:
    """The last build of `backend_description` was "skipped" or "abandoned" for the tuning budget."""
    build = _find_build(backend_description)
    if build is not None:
        build.over_budget = kind
        _flush()


def finish_budget(left_s: float) -> None:
    """Closes the graph's budget entry: the time left, and every candidate the budget skipped or
    abandoned, with the reason (also for builds adopted from device-pool workers)."""
    graph = _state.graph
    if graph is None or not graph.budget:
        return
    graph.budget["left_at_end_s"] = round(left_s, 3)
    graph.budget["skipped"] = [
        {"backend": b.backend, "reason": b.skipped} for b in graph.builds if b.over_budget == "skipped"
    ]
    graph.budget["abandoned"] = [
        {"backend": b.backend, "reason": (b.error or {}).get("message", ""), "after_s": b.duration_s}
        for b in graph.builds
        if b.over_budget == "abandoned"
    ]
    _flush()


def record_step(name: str, duration_s: float, **extra: object) -> None:
    if _state.build is not None:
        _state.build.steps.append({"name": name, "duration_s": round(duration_s, 4), **extra})


def record_correctness(summary: object) -> None:
    """Stores a NumericSummary (or a dict) in the current build."""
    build = _state.build
    if build is None:
        return
    if isinstance(summary, dict):
        build.correctness = dict(summary)
        return
    worst = dict(getattr(summary, "worst", {}) or {})
    build.correctness = {
        "precision_class": getattr(summary, "precision_class", None),
        "passed": getattr(summary, "passed", None),
        "decided_by": worst.get("decided_by"),
        "tolerance": json_safe(getattr(summary, "tolerance", None)),
        "worst": dict(getattr(summary, "worst", {}) or {}),
        "leaves": list(getattr(summary, "leaves", []) or []),
    }


def end_build(success: bool, error: BaseException | None = None) -> None:
    build = _state.build
    if build is None:
        return
    build.success = success
    if error is not None:
        build.error = error_dict(error)
    build.duration_s = round(time.perf_counter() - build._start, 3)
    if build.build_dir:
        with contextlib.suppress(Exception):
            build.artifact_size_bytes = sum(p.stat().st_size for p in Path(build.build_dir).rglob("*") if p.is_file())
    _flush()


def fail_build(message: str | BaseException, backend_description: str | None = None) -> None:
    """A build that was built but lost later (e.g. profiling failed)."""
    build = _find_build(backend_description)
    if build is None:
        return
    build.success = False
    build.error = (
        error_dict(message)
        if isinstance(message, BaseException)
        else {"type": "MeasurementError", "message": str(message), "traceback": ""}
    )
    _flush()


def _find_build(backend_description: str | None) -> BuildReport | None:
    if backend_description is None or _state.graph is None:
        return _state.build
    for build in reversed(_state.graph.builds):
        if build.backend == backend_description:
            return build
    return _state.build


def record_measurements(
    results: list[Mapping[str, object]], kind: str = "build", backend_description: str | None = None
) -> None:
    """Stores per-batch-size dicts (docs/reference/measurement.md#batch-sweep): kind "build" (the current build, or the
    named one), "baseline" (eager) or "max_batch_search"."""
    graph = _state.graph
    if graph is None:
        return
    rows = [dict(r) for r in results or []]
    if kind == "baseline":
        graph.baseline_measurements.extend(rows)
    elif kind == "max_batch_search":
        graph.max_batch_search_measurements.extend(rows)
    else:
        build = _find_build(backend_description)
        if build is not None:
            build.measurements.extend(rows)
    _flush()
