"""Strategies that measure every candidate and pick the best by a metric
(docs/reference/strategies.md#selection-and-the-gate): MaxThroughputStrategy, MinLatencyStrategy and
LatencyBudgetStrategy. The selection rules (strictly better wins, the gate, budget filtering) are the C++ core's."""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from aitune._native import _C
from aitune.exceptions import NoValidBackendError
from aitune.torch.backend.backend import Backend
from aitune.torch.backend.common.serving import graph_dispatcher
from aitune.torch.logging_utils import captured_output
from aitune.torch.task.sweep import profile
from aitune.torch.task.profiling.config import ProfilingConfig
from aitune.torch.tune_data import recorder as tune_data
from aitune.torch.tune_strategy.default_backends import profiling_defaults
from aitune.torch.tune_strategy.outcome import KEPT_EAGER
from aitune.torch.tune_strategy.records import CandidateRecord, RemoteBuild
from aitune.torch.tune_strategy.remote_builds import materialize, replay
from aitune.torch.tune_strategy.strategy_results import (
    BackendPerfResult,
    BackendProfilingResult,
    LatencyBudgetProfilingResult,
    MaxThroughputProfilingResult,
    MinLatencyProfilingResult,
)
from aitune.torch.tune_strategy.tune_strategy import Baseline, GraphContext, TuneStrategy, checked_budget_s

if TYPE_CHECKING:
    import torch


@dataclasses.dataclass
class Measured:
    """A candidate's metric at its selected batch size, and the same as AITune's result object."""

    backend: Backend
    metric: float
    batch_size: int
    latency_ms: float
    throughput_per_s: float
    result: BackendProfilingResult


class ProfilingTuneStrategy(TuneStrategy):
    """`budget_s` (seconds) bounds the tuning as config.tuning_budget_s does and wins over it; under
    either, the candidates are tried cheapest expected build first (docs/reference/strategies.md#tuning-budget)."""

    _walks_candidates = True
    metric_name = "throughput"  # or "latency"
    # describe() in AITune's form (docs/guide.md, "Coming from AITune")
    _title = "Max Throughput Strategy"
    _description = "evaluate all backends, return backend with max throughput"

    def __init__(
        self,
        backends: list[Backend] | None = None,
        profiling_config: ProfilingConfig | None = None,
        *,
        sink: logging.Logger | None = None,
        min_speedup_threshold_percent: float = 0.0,
        budget_s: float | None = None,
    ) -> None:
        super().__init__(sink=sink, profiling_config=profiling_config)
        self.budget_s = checked_budget_s(budget_s)
        self._default_backends = backends is None
        self.backends = list(backends) if backends is not None else profiling_defaults()
        for b in self.backends:
            if not isinstance(b, Backend):
                raise TypeError(f"{type(self).__name__} backends must be Backend instances, got {type(b).__name__}")
        self.min_speedup_threshold_percent = min_speedup_threshold_percent
        self._performance_validation = True
        self.perf_validation_results: list[dict[str, object]] = []
        self._baseline: Measured | None = None

    def enable_performance_validation(self, enable: bool = True) -> ProfilingTuneStrategy:
        self._performance_validation = enable
        return self

    @property
    def performance_validation(self) -> bool:
        return self._performance_validation

    def _gate_rule_text(self) -> str:
        if not self._performance_validation:
            return ""
        return f"; it must beat the eager baseline by more than {self.min_speedup_threshold_percent}% or eager is kept"

    def selection_rule(self) -> str:
        return f"{type(self).__name__}: highest throughput over the batch sizes up to the graph's max{self._gate_rule_text()}"

    def baseline(self) -> Baseline | None:
        measured = self._baseline
        if measured is None:
            return None
        return Baseline(measured.throughput_per_s, measured.latency_ms, scales_records=True)

    def end_graph(self) -> None:
        if self._baseline is not None:
            self._baseline.backend.deactivate()

    def _reset_candidate_results(self) -> None:
        self.perf_validation_results = []

    def _record_verdict(self, record: CandidateRecord, verdict: Measured | None) -> bool:
        if verdict is None:
            return False
        record.point = (verdict.metric, verdict.batch_size, verdict.latency_ms, verdict.throughput_per_s)
        return True

    def prepare(self, device: torch.device | str | None) -> ProfilingTuneStrategy:
        """`backends=None`: the default list for the tuning device (CUDA-graph variants on CUDA)."""
        if self._default_backends:
            self.backends = profiling_defaults(device)
        return self

    def _describe_parts(self) -> list[str]:
        return [
            f"name: {self._title}",
            f"description: {self._description}",
            "backends:",
            *[f"  {b.describe()}" for b in self.backends],
            *([f"budget_s: {self.budget_s:g}"] if self.budget_s is not None else []),
        ]

    def to_json_dict(self) -> dict[str, object]:
        data = {
            "backends": [b.describe() for b in self.backends],
            "min_speedup_threshold_percent": self.min_speedup_threshold_percent,
            "profiling_config": self.profiling_config.to_json_dict(),
        }
        return {**data, "budget_s": self.budget_s} if self.budget_s is not None else data

    def candidates(self) -> list[Backend]:
        """In list order; under a tuning budget, cheapest expected build first (a stable sort, so
        equal costs keep their order and a worker process sorts them alike)."""
        order = list(self.backends)
        if self._budget_in_effect():
            order.sort(key=lambda b: b.expected_build_cost())
        return order

    # -- measurement -----------------------------------------------------------------------
    def _batch_sizes(self, ctx: GraphContext) -> list[int]:
        max_bs = ctx.graph.max_batch_size()
        if not (self.profiling_config.batching and ctx.graph.has_batch_axis() and max_bs > 1):
            return [1]
        sizes = [b for b in self.profiling_config.batch_sizes if b <= max_bs]
        return sizes or [1]

    def _latency_limit_ms(self) -> float | None:
        return None

    def _measure(self, backend: Backend, ctx: GraphContext, kind: str = "build") -> Measured | None:
        results = profile(
            graph_dispatcher(ctx.graph, backend, ctx.module_name),
            ctx.graph,
            ctx.data,
            self.profiling_config,
            ctx.device,
            self._batch_sizes(ctx),
            stop_above_latency_ms=self._latency_limit_ms(),
            label=backend.describe(),
        )
        tune_data.record_measurements(results, kind=kind, backend_description=backend.describe())
        if kind == "build":
            self.check_cuda_graph_capture(backend)  # measuring captures new shapes too
        return self._select_point(backend, results)

    def _select_point(self, backend: Backend, results: list[dict[str, object]]) -> Measured | None:
        if not results:
            return None
        best = max(results, key=lambda r: r["throughput_per_s"])
        return self._point(backend, best["batch_size"], best["host_latency_ms_mean"], best["throughput_per_s"])

    def _point(self, backend: Backend, batch_size: int, latency_ms: float, throughput: float) -> Measured:
        """A candidate's point at `batch_size`, with the strategy's metric and AITune's result
        object: from its own measurements, or a multi-device worker's (scaled) ones."""
        return Measured(
            backend,
            throughput,
            batch_size,
            latency_ms,
            throughput,
            MaxThroughputProfilingResult(selected_batch_size=batch_size, throughput=throughput),
        )

    def _speedup(self, candidate: Measured, baseline: Measured) -> float:
        if self.metric_name == "latency":
            return _C.speedup_latency(candidate.metric, baseline.metric)
        return _C.speedup_throughput(candidate.metric, baseline.metric)

    # -- pipeline --------------------------------------------------------------------------
    def _pre_tune(self, ctx: GraphContext) -> None:
        self._baseline = None
        self.perf_validation_results = []
        if not self._performance_validation:
            return
        folder = ctx.cache_dir / "baseline"
        self._log("🔄 Profiling eager baseline...please wait")
        try:
            backend = self._eager_backend()
            with captured_output(folder / "build.log"):
                backend.build(ctx.module, ctx.graph, ctx.data, ctx.device, folder)
            self._baseline = self._measure(backend, ctx, kind="baseline")
            if self._baseline is not None:
                self._log(
                    "📊 Eager baseline: batch size=%d, %s=%.4g",
                    self._baseline.batch_size,
                    self.metric_name,
                    self._baseline.metric,
                )
        # a failed baseline disables the gate (docs/reference/strategies.md#per-graph-pipeline)
        except Exception as e:  # noqa: BLE001
            self._log("⚠️ Eager baseline failed, performance validation is disabled: %s: %s", type(e).__name__, e)

    def _tune(self, ctx: GraphContext) -> Backend:
        measured: list[Measured] = []
        for blueprint in self.candidates():
            backend = self._build_and_validate(blueprint, ctx, raise_on_failure=False)
            if backend is None:
                continue
            point = self._measured_within_budget(backend, ctx, lambda: self._measure_candidate(backend, ctx))
            if point is not None:
                measured.append(point)
        return self._select(ctx, measured)

    def _measure_candidate(self, backend: Backend, ctx: GraphContext) -> Measured | None:
        """A built, validated candidate's point, or None (then it is released): also what a
        multi-device worker runs."""
        try:
            point = self._measure(backend, ctx)
        except Exception as e:  # noqa: BLE001 - a candidate that cannot be measured loses
            if ctx.budget is not None and ctx.budget.fired:
                raise  # the deadline's interrupt, re-raised by a compiler as its own: abandoned, not failed
            self._log("❌ backend profiling failed for %s: %s: %s", backend.describe(), type(e).__name__, e)
            self.backend_results[-1].update({"success": False, "error": f"{type(e).__name__}: {e}"})
            tune_data.fail_build(e, backend.describe())
            self._tally.record_failure(None)
            self._siblings.before_release(backend)
            backend.deactivate()
            return None
        if point is None:
            self._log("❌ %s has no measurement within the limits", backend.describe())
            self.backend_results[-1].update({"success": False, "error": "no batch size within the limits"})
            tune_data.fail_build("no batch size within the limits", backend.describe())
            self._tally.record_failure(None)
            self._siblings.before_release(backend)
            backend.deactivate()
            return None
        if len(self._batch_sizes(ctx)) > 1:
            backend.cuda_graphs.release_captures()  # one pool per swept size adds up over candidates
        self.backend_results[-1].update({**point.result.to_json_dict(self.metric_name), "latency": point.latency_ms})
        corr = self.backend_results[-1].get("correctness") or {}
        error = (  # the error beside the speed (docs/reference/validation.md#reporting)
            f", error vs eager ({corr['precision_class']}): rel_l2={corr['rel_l2_error']:.3g}"
            if "rel_l2_error" in corr
            else ""
        )
        self._log(
            "✅ backend profiled - %s: %.4g, batch size: %d%s", self.metric_name, point.metric, point.batch_size, error
        )
        return point

    # -- several devices (docs/guide.md, "Tuning on several GPUs") -----------------------------
    def decide(self, ctx: GraphContext, records: list[CandidateRecord]) -> Backend:
        """The sequential selection (_select) over the workers' points, each scaled by its
        device's eager baseline against the tuning device's (the noise between devices is
        logged by the pool). The winner's build is then served on the tuning device; if that
        fails, the selection runs again without it."""
        for record in records:
            replay(self, record)
        candidates = [r for r in records if r.point is not None]
        while True:
            measured = []
            for r in candidates:
                _, batch_size, latency_ms, throughput = r.scaled_point(self.metric_name)
                measured.append(self._point(RemoteBuild(r), batch_size, latency_ms, throughput))
            winner = self._select(ctx, measured)
            if not isinstance(winner, RemoteBuild):
                return winner  # the eager baseline
            backend = materialize(self, winner.record, ctx)
            if backend is not None:
                return backend
            candidates.remove(winner.record)
            if self._baseline is not None:
                self._baseline.backend.activate()  # _select released it for the winner that failed

    def _select(self, ctx: GraphContext, measured: list[Measured]) -> Backend:
        candidates = [(m.backend.describe(), True, m.metric) for m in measured]
        index = _C.pick_best(candidates, self.metric_name)
        winner = measured[index] if index is not None else None
        for i, m in enumerate(measured):
            if i != index:
                # losers free their memory at once (docs/reference/strategies.md#per-graph-pipeline)
                m.backend.deactivate()
        if winner is not None:
            self._log("🎯 new best %s for %s: %.4g", self.metric_name, winner.backend.describe(), winner.metric)
        baseline = self._baseline
        if self._performance_validation and baseline is not None:
            if winner is None:
                self._log("ℹ️ Falling back to TorchEager baseline (%.4g): no candidate qualified", baseline.metric)
                self._keep_eager(ctx)
                return baseline.backend
            for m in measured:  # one result per measured candidate, as in AITune
                candidate_speedup = self._speedup(m, baseline)
                self._tally.record_speedup(m.backend.describe(), candidate_speedup)
                self.perf_validation_results.append(
                    BackendPerfResult(
                        m.backend.describe(),
                        m.metric,
                        baseline.metric,
                        candidate_speedup,
                        bool(_C.passes_profiling_gate(candidate_speedup, self.min_speedup_threshold_percent)),
                    )
                )
            speedup = self._speedup(winner, baseline)
            passed = _C.passes_profiling_gate(speedup, self.min_speedup_threshold_percent)
            for result in self.backend_results:
                if result.get("backend") == winner.backend.describe() and result.get("success"):
                    result["speedup_vs_eager"] = speedup
            if not passed:
                winner.backend.deactivate()
                self._log(
                    "ℹ️ Falling back to TorchEager baseline (%.4g): %s speedup %.3fx does not beat eager",
                    baseline.metric,
                    winner.backend.describe(),
                    speedup,
                )
                self._keep_eager(ctx)
                return baseline.backend
            baseline.backend.deactivate()
            self._log("⚡ speedup: %.2fx (%s %.4g → %.4g)", speedup, self.metric_name, baseline.metric, winner.metric)
        if winner is None:
            gate = f"> {1 + self.min_speedup_threshold_percent / 100:.2f}×"
            outcome = self._tally.kept_eager(ctx.module_name, ctx.graph.name, gate)
            self._log("%s", outcome.message())
            tune_data.record_outcome(KEPT_EAGER, outcome.message())
            raise NoValidBackendError("No correct backend found", outcome=outcome)
        self._log(
            "✅ Selected %s for module %s and graph spec %s.",
            winner.backend.describe(),
            ctx.module_name,
            ctx.graph.display_name,
        )
        return winner.backend

    def _keep_eager(self, ctx: GraphContext) -> None:
        """The plain kept-eager line (INFO) and telemetry outcome; the eager baseline serves."""
        gate = f"> {1 + self.min_speedup_threshold_percent / 100:.2f}×"
        message = self._tally.kept_eager(ctx.module_name, ctx.graph.name, gate).message()
        self._log("%s", message)
        tune_data.record_outcome(KEPT_EAGER, message)


class MaxThroughputStrategy(ProfilingTuneStrategy):
    """The best throughput over the batch sizes up to the graph's max."""


class MinLatencyStrategy(ProfilingTuneStrategy):
    """The lowest mean latency at batch size 1; the max-batch search is off."""

    metric_name = "latency"
    _title = "Min Latency Strategy"
    _description = "evaluate all backends, return backend with min latency"

    def __init__(
        self,
        backends: list[Backend] | None = None,
        profiling_config: ProfilingConfig | None = None,
        *,
        sink: logging.Logger | None = None,
        min_speedup_threshold_percent: float = 0.0,
        budget_s: float | None = None,
    ) -> None:
        super().__init__(
            backends,
            profiling_config,
            sink=sink,
            min_speedup_threshold_percent=min_speedup_threshold_percent,
            budget_s=budget_s,
        )
        self._find_max_batch_size = False

    def _batch_sizes(self, ctx: GraphContext) -> list[int]:
        return [1]

    def selection_rule(self) -> str:
        return f"{type(self).__name__}: lowest mean latency at batch size 1{self._gate_rule_text()}"

    def _select_point(self, backend: Backend, results: list[dict[str, object]]) -> Measured | None:
        if not results:
            return None
        r = results[0]
        return self._point(backend, r["batch_size"], r["host_latency_ms_mean"], r["throughput_per_s"])

    def _point(self, backend: Backend, batch_size: int, latency_ms: float, throughput: float) -> Measured:
        return Measured(
            backend,
            latency_ms,
            batch_size,
            latency_ms,
            throughput,
            MinLatencyProfilingResult(selected_batch_size=batch_size, latency=latency_ms),
        )


class LatencyBudgetStrategy(ProfilingTuneStrategy):
    """Each backend's best-throughput batch size whose mean latency is within the budget; then
    the best throughput. No backend within budget raises before any eager fallback."""

    _title = "Latency Budget Strategy"
    _description = "evaluate all backends, return max throughput backend within latency budget"

    def __init__(
        self,
        latency_budget_ms: float,
        backends: list[Backend] | None = None,
        profiling_config: ProfilingConfig | None = None,
        *,
        sink: logging.Logger | None = None,
        min_speedup_threshold_percent: float = 0.0,
        budget_s: float | None = None,
    ) -> None:
        if (
            isinstance(latency_budget_ms, bool)
            or not isinstance(latency_budget_ms, (int, float))
            or latency_budget_ms <= 0
        ):
            raise ValueError(f"latency_budget_ms must be positive (> 0), got {latency_budget_ms!r}")
        super().__init__(
            backends,
            profiling_config,
            sink=sink,
            min_speedup_threshold_percent=min_speedup_threshold_percent,
            budget_s=budget_s,
        )
        self.latency_budget_ms = float(latency_budget_ms)

    def _describe_parts(self) -> list[str]:
        return [*super()._describe_parts(), f"latency_budget_ms: {self.latency_budget_ms:g}"]

    def to_json_dict(self) -> dict[str, object]:
        return {"latency_budget_ms": self.latency_budget_ms, **super().to_json_dict()}

    def _latency_limit_ms(self) -> float | None:
        return self.latency_budget_ms

    def selection_rule(self) -> str:
        return (
            f"{type(self).__name__}: best throughput among batch sizes whose mean latency is within "
            f"{self.latency_budget_ms} ms{self._gate_rule_text()}"
        )

    def _select_point(self, backend: Backend, results: list[dict[str, object]]) -> Measured | None:
        points = [(r["batch_size"], r["host_latency_ms_mean"], r["throughput_per_s"]) for r in results]
        best = _C.best_within_budget(points, self.latency_budget_ms)
        if best is None:
            return None
        bs, latency, throughput = best
        return self._point(backend, bs, latency, throughput)

    def _point(self, backend: Backend, batch_size: int, latency_ms: float, throughput: float) -> Measured:
        return Measured(
            backend,
            throughput,
            batch_size,
            latency_ms,
            throughput,
            LatencyBudgetProfilingResult(selected_batch_size=batch_size, throughput=throughput, latency=latency_ms),
        )

    def _select(self, ctx: GraphContext, measured: list[Measured]) -> Backend:
        if not measured:
            if self._baseline is not None:
                self._baseline.backend.deactivate()
            raise NoValidBackendError(_C.budget_failure_message(self.latency_budget_ms))
        return super()._select(ctx, measured)
