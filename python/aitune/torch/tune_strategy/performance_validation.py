"""The eager performance gate of FirstWins and OneBackend (docs/guide.md, "The performance
gate"): eager and the candidate are measured at the batch sizes the caller tuned with (capped at
the graph's max; batch 1 when unknown or without a batch axis), and the candidate passes when the
geometric mean of its speedups meets 1 + threshold/100 and it is not slower than eager by more
than 3 % at any of those sizes (the rule itself is the C++ core's `first_wins_gate`).

Why not at the max batch size the search found: a batch-1 user must not have a candidate
rejected because it ties eager at batch 2048, where nothing is launch-bound any more."""

from __future__ import annotations

import dataclasses
import logging
import math

from aitune._native import _C
from aitune.torch.backend.backend import Backend
from aitune.torch.backend.common.serving import graph_dispatcher
from aitune.torch.logging_utils import captured_output
from aitune.torch.task.sweep import SweepLimits, profile
from aitune.torch.task.profiling.config import AllSamplesProfilingStopStrategy, ProfilingConfig
from aitune.torch.tune_data import recorder as tune_data
from aitune.torch.tune_strategy.outcome import KEPT_EAGER, KeptEager
from aitune.torch.tune_strategy.records import CandidateRecord
from aitune.torch.tune_strategy.strategy_results import PerformanceValidationMixinResult
from aitune.torch.tune_strategy.tune_strategy import Baseline, GraphContext, TuneStrategy

logger = logging.getLogger("aitune")


def _direction(speedup: float) -> str:
    return "▲ faster" if speedup >= 1 else "▼ slower"


def gate_batch_sizes(ctx: GraphContext, batching: bool) -> list[int]:
    """The caller's batch sizes that reached the graph, each capped at the graph's max; [1] when
    they are unknown (JIT mode) or the graph has no batch axis."""
    if not (batching and ctx.graph.has_batch_axis()):
        return [1]
    max_bs = max(1, ctx.graph.max_batch_size())
    return sorted({min(bs, max_bs) for bs in ctx.batch_sizes if bs >= 1}) or [1]


class PerformanceValidatedStrategy(TuneStrategy):
    def __init__(
        self,
        *,
        sink: logging.Logger | None = None,
        profiling_config: ProfilingConfig | None = None,
        min_speedup_threshold_percent: float = 1.0,
    ) -> None:
        super().__init__(sink=sink, profiling_config=profiling_config)
        self.min_speedup_threshold_percent = min_speedup_threshold_percent
        self._performance_validation = True
        self.perf_validation_results: list[PerformanceValidationMixinResult] = []
        self._baseline_backend: Backend | None = None
        self._baseline_throughput: float | None = None  # at the first gate batch size
        self._baseline_by_size: dict[int, float] = {}
        self._baseline_batch_size = 1
        self._gate_sizes: list[int] = [1]
        self._selected_speedup: tuple[float, float, float] | None = None
        self._kept_eager: KeptEager | None = None  # when nothing qualified

    def _searches_lazily(self) -> bool:
        return True  # the gate measures at the caller's batch sizes, not at the searched max

    def enable_performance_validation(self, enable: bool = True) -> PerformanceValidatedStrategy:
        self._performance_validation = enable
        return self

    @property
    def performance_validation(self) -> bool:
        return self._performance_validation

    def _gate_rule_text(self) -> str:
        """The gate's part of the selection rule for the tuning report ("" when it is off)."""
        if not self._performance_validation:
            return ""
        return f"; it must beat the eager baseline by more than {self.min_speedup_threshold_percent}% or eager is kept"

    def baseline(self) -> Baseline | None:
        return Baseline(self._baseline_throughput) if self._baseline_throughput else None

    def end_graph(self) -> None:
        if self._baseline_backend is not None:
            self._baseline_backend.deactivate()

    def _reset_candidate_results(self) -> None:
        self.perf_validation_results = []
        self._selected_speedup = None

    def _record_verdict(self, record: CandidateRecord, verdict: object) -> bool:
        record.passed = bool(verdict)
        record.selected_speedup = self._selected_speedup if verdict else None
        return record.passed

    def _gate_text(self) -> str:
        return f"≥ {1 + self.min_speedup_threshold_percent / 100:.2f}×"

    def _gate_profiling_config(self) -> ProfilingConfig:
        # Every gate size is measured: the sweep's saturation rule must not skip one.
        return dataclasses.replace(self.profiling_config, profiling_stop_strategy=AllSamplesProfilingStopStrategy())

    def _pre_tune(self, ctx: GraphContext) -> None:
        self.perf_validation_results = []
        self._baseline_backend = None
        self._baseline_throughput = None
        self._baseline_by_size = {}
        self._selected_speedup = None
        if not self._performance_validation:
            return
        self._gate_sizes = gate_batch_sizes(ctx, self.profiling_config.batching)
        self._baseline_batch_size = self._gate_sizes[0]
        folder = ctx.cache_dir / "perf_validation_baseline"
        self._log("🔄 Profiling eager baseline...please wait")
        try:
            backend = self._eager_backend()
            with captured_output(folder / "build.log"):
                backend.build(ctx.module, ctx.graph, ctx.data, ctx.device, folder)
            results = profile(
                graph_dispatcher(ctx.graph, backend, ctx.module_name),
                ctx.graph,
                ctx.data,
                self._gate_profiling_config(),
                ctx.device,
                self._gate_sizes,
                label=f"{backend.describe()} (eager baseline)",
            )
            tune_data.record_measurements(results, kind="baseline")
            self._baseline_by_size = {r["batch_size"]: r["throughput_per_s"] for r in results}
            self._baseline_throughput = results[0]["throughput_per_s"]
            self._baseline_backend = backend
            for r in results:
                self._log(
                    "📊 Eager baseline: batch size=%d, throughput=%.2f samples/s",
                    r["batch_size"],
                    r["throughput_per_s"],
                )
        # a failed baseline disables the gate (docs/reference/strategies.md#per-graph-pipeline)
        except Exception as e:  # noqa: BLE001
            self._log("⚠️ Eager baseline failed, performance validation is disabled: %s: %s", type(e).__name__, e)

    def _passes_gate(self, backend: Backend, ctx: GraphContext) -> bool:
        if not self._performance_validation or not self._baseline_throughput:
            if self._performance_validation:
                self._log(
                    "ℹ️ No eager baseline throughput; %s accepted without the performance gate", backend.describe()
                )
            return True
        limits = SweepLimits()
        try:
            results = profile(
                graph_dispatcher(ctx.graph, backend, ctx.module_name),
                ctx.graph,
                ctx.data,
                self._gate_profiling_config(),
                ctx.device,
                self._gate_sizes,
                label=f"{backend.describe()} (performance gate)",
                limits=limits,
            )
            tune_data.record_measurements(results, backend_description=backend.describe())
        # docs/reference/strategies.md#selection-and-the-gate: a candidate whose profiling fails is accepted
        except Exception as e:  # noqa: BLE001
            self._log(
                "ℹ️ Profiling %s failed (%s: %s); accepted without the performance gate",
                backend.describe(),
                type(e).__name__,
                e,
            )
            return True
        if not results:  # e.g. out of memory at the first gate batch size: as if profiling had failed
            self._log(
                "ℹ️ Profiling %s measured no batch size (stopped by %s); accepted without the performance gate",
                backend.describe(),
                limits.stopped_by,
            )
            return True
        self.check_cuda_graph_capture(backend)  # measuring may capture new shapes
        points = [
            (r["batch_size"], r["throughput_per_s"], self._baseline_by_size.get(r["batch_size"])) for r in results
        ]
        speedups = [_C.speedup_throughput(tp, base) if base else math.nan for _, tp, base in points]
        verdict = _C.first_wins_gate(speedups, self.min_speedup_threshold_percent)
        for (bs, tp, _), speedup in zip(points, speedups):
            self._log(
                "📊 %s: batch size=%d, throughput=%.2f samples/s, speedup=%.2fx (%s)",
                backend.describe(),
                bs,
                tp,
                speedup,
                _direction(speedup),
            )
        geomean = verdict["geomean_speedup"]
        detail = ""
        if verdict["too_slow_somewhere"] and _C.passes_first_wins_gate(geomean, self.min_speedup_threshold_percent):
            worst_bs = points[verdict["worst_index"]][0]
            detail = (
                f"not slower than eager by more than {100 * _C.MAX_GATE_SLOWDOWN:g} % at any batch size, "
                f"but it was {verdict['worst_speedup']:.2f}× at batch size {worst_bs}"
            )
        passed = bool(verdict["passed"])
        if len(points) > 1:
            self._log(
                "📊 %s: geometric-mean speedup %.2fx over batch sizes %s (gate %s%s): %s",
                backend.describe(),
                geomean,
                [p[0] for p in points],
                self._gate_text(),
                f"; {detail}" if detail else "",
                "passed" if passed else "not passed",
            )
        self._tally.record_speedup(backend.describe(), geomean, detail)
        self.perf_validation_results.append(
            PerformanceValidationMixinResult(
                backend.describe(),
                points[0][1],
                self._baseline_throughput,
                geomean,
                passed,
                batch_sizes=[p[0] for p in points],
                speedups=speedups,
                worst_speedup=verdict["worst_speedup"],
            )
        )
        if self.backend_results:
            self.backend_results[-1].update(
                {"throughput": points[0][1], "speedup_vs_eager": geomean, "selected_batch_size": points[0][0]}
            )
        if passed:
            self._selected_speedup = (geomean, self._baseline_throughput, points[0][1])
        return passed

    def _keep_eager_message(self, ctx: GraphContext) -> None:
        """Logs the plain kept-eager line (INFO) and records the outcome in the telemetry."""
        self._kept_eager = self._tally.kept_eager(ctx.module_name, ctx.graph.name, self._gate_text())
        message = self._kept_eager.message()
        self._log("%s", message)
        tune_data.record_outcome(KEPT_EAGER, message)

    def _post_tune(self, ctx: GraphContext, backend: Backend) -> None:
        if backend is not self._baseline_backend and self._baseline_backend is not None:
            self._baseline_backend.deactivate()
        if self._selected_speedup is None:
            return
        speedup, before, after = self._selected_speedup
        if logger.getEffectiveLevel() > logging.INFO:
            logger.warning(
                "[AITune] ⚡ %s | backend: %s | speedup: %.2fx", ctx.module_name, backend.describe(), speedup
            )
        else:
            self._log("⚡ speedup: %.2fx (%.2f → %.2f samples/s)", speedup, before, after)
