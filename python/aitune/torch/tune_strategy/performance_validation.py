"""The eager performance gate of FirstWins and OneBackend (SPEC §6.1 step 2, §6.2): profile
eager at the graph's max batch size, then accept a candidate only when its throughput there is
at least (1 + threshold/100) times eager's."""

from __future__ import annotations

import logging
from typing import Any

from aitune._native import _C
from aitune.torch.backend.backend import Backend
from aitune.torch.logging_utils import captured_output
from aitune.torch.task.profile import profile
from aitune.torch.tune_data import report as tune_data
from aitune.torch.tune_strategy.tune_strategy import GraphContext, TuneStrategy

logger = logging.getLogger("aitune")


def _direction(speedup: float) -> str:
    return "▲ faster" if speedup >= 1 else "▼ slower"


class PerformanceValidatedStrategy(TuneStrategy):
    def __init__(self, *, sink: Any = None, profiling_config: Any = None,
                 min_speedup_threshold_percent: float = 1.0) -> None:
        super().__init__(sink=sink, profiling_config=profiling_config)
        self.min_speedup_threshold_percent = min_speedup_threshold_percent
        self._performance_validation = True
        self.perf_validation_results: list[dict[str, Any]] = []
        self._baseline_backend: Backend | None = None
        self._baseline_throughput: float | None = None
        self._baseline_batch_size = 1
        self._selected_speedup: tuple[float, float, float] | None = None

    def enable_performance_validation(self, enable: bool = True) -> PerformanceValidatedStrategy:
        self._performance_validation = enable
        return self

    def _pre_tune(self, ctx: GraphContext) -> None:
        self.perf_validation_results = []
        self._baseline_backend = None
        self._baseline_throughput = None
        self._selected_speedup = None
        if not self._performance_validation:
            return
        self._baseline_batch_size = ctx.graph.max_batch_size() if ctx.graph.has_batch_axis() else 1
        folder = ctx.cache_dir / "perf_validation_baseline"
        self._log("🔄 Profiling eager baseline...please wait")
        try:
            backend = self._eager_backend()
            with captured_output(folder / "build.log"):
                backend.build(ctx.module, ctx.graph, ctx.data, ctx.device, folder)
            results = profile(backend.runner(), ctx.graph, ctx.data, self.profiling_config, ctx.device,
                              [self._baseline_batch_size], label=f"{backend.describe()} (eager baseline)")
            tune_data.record_measurements(results, kind="baseline")
            self._baseline_throughput = results[0]["throughput_per_s"]
            self._baseline_backend = backend
            self._log("📊 Eager baseline: batch size=%d, throughput=%.2f samples/s", self._baseline_batch_size,
                      self._baseline_throughput)
        except Exception as e:  # noqa: BLE001 - a failed baseline disables the gate (SPEC §6.1)
            self._log("⚠️ Eager baseline failed, performance validation is disabled: %s: %s", type(e).__name__, e)

    def _passes_gate(self, backend: Backend, ctx: GraphContext) -> bool:
        if not self._performance_validation or not self._baseline_throughput:
            if self._performance_validation:
                self._log("ℹ️ No eager baseline throughput; %s accepted without the performance gate",
                          backend.describe())
            return True
        try:
            results = profile(backend.runner(), ctx.graph, ctx.data, self.profiling_config, ctx.device,
                              [self._baseline_batch_size], label=f"{backend.describe()} (performance gate)")
            tune_data.record_measurements(results, backend_description=backend.describe())
            throughput = results[0]["throughput_per_s"]
        except Exception as e:  # noqa: BLE001 - SPEC §6.2: a candidate whose profiling fails is accepted
            self._log("ℹ️ Profiling %s failed (%s: %s); accepted without the performance gate", backend.describe(),
                      type(e).__name__, e)
            return True
        speedup = _C.speedup_throughput(throughput, self._baseline_throughput)
        passed = _C.passes_first_wins_gate(speedup, self.min_speedup_threshold_percent)
        self.perf_validation_results.append({
            "backend_description": backend.describe(), "throughput": throughput,
            "baseline_throughput": self._baseline_throughput, "speedup": speedup, "passed": passed,
        })
        if self.backend_results:
            self.backend_results[-1].update({"throughput": throughput, "speedup_vs_eager": speedup,
                                             "selected_batch_size": self._baseline_batch_size})
        self._log("📊 %s: batch size=%d, throughput=%.2f samples/s, speedup=%.2fx (%s)", backend.describe(),
                  self._baseline_batch_size, throughput, speedup, _direction(speedup))
        if passed:
            self._selected_speedup = (speedup, self._baseline_throughput, throughput)
        return passed

    def _post_tune(self, ctx: GraphContext, backend: Backend) -> None:
        if backend is not self._baseline_backend and self._baseline_backend is not None:
            self._baseline_backend.deactivate()
        if self._selected_speedup is None:
            return
        speedup, before, after = self._selected_speedup
        if logger.getEffectiveLevel() > logging.INFO:
            logger.warning("[AITune] ⚡ %s | backend: %s | speedup: %.2fx", ctx.module_name, backend.describe(),
                           speedup)
        else:
            self._log("⚡ speedup: %.2fx (%.2f → %.2f samples/s)", speedup, before, after)
