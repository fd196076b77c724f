"""Strategies as AITune shows them: describe() in its name/description/backend(s) form, and
perf_validation_results / profiling results as objects with attributes (r.metric,
r.baseline_metric, r.speedup, r.passed), still readable as mappings."""

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend import TorchEagerBackend, TorchEagerBackendConfig
from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig
from aitune.torch.tune_strategy.latency_budget_strategy import LatencyBudgetProfilingResult, LatencyBudgetStrategy
from aitune.torch.tune_strategy.max_throughput_strategy import MaxThroughputProfilingResult, MaxThroughputStrategy
from aitune.torch.tune_strategy.min_latency_strategy import MinLatencyProfilingResult, MinLatencyStrategy
from aitune.torch.tune_strategy.profiling_tune_strategy import BackendPerfResult
from aitune.torch.tune_strategy.strategy_results import PerformanceValidationMixinResult

EAGER = TorchEagerBackend()
AUTOCAST = TorchEagerBackend(TorchEagerBackendConfig(autocast_enabled=True))


def test_describe_in_aitunes_form():
    assert ait.FirstWinsStrategy([EAGER, AUTOCAST]).describe() == (
        "name: First Wins Strategy\n"
        "description: evaluate backends in order, return first working backend\n"
        "backends:\n"
        "  TorchEagerBackend()\n"
        "  TorchEagerBackend(autocast_enabled=True)"
    )
    assert ait.OneBackendStrategy(EAGER).describe() == (
        "name: One Backend Strategy\ndescription: Use only one backend\nbackend: TorchEagerBackend()"
    )
    assert MaxThroughputStrategy([EAGER]).describe() == (
        "name: Max Throughput Strategy\ndescription: evaluate all backends, return backend with max throughput\n"
        "backends:\n  TorchEagerBackend()"
    )
    assert MinLatencyStrategy([EAGER]).describe() == (
        "name: Min Latency Strategy\ndescription: evaluate all backends, return backend with min latency\n"
        "backends:\n  TorchEagerBackend()"
    )
    assert LatencyBudgetStrategy(12.5, [EAGER]).describe() == (
        "name: Latency Budget Strategy\n"
        "description: evaluate all backends, return max throughput backend within latency budget\n"
        "backends:\n  TorchEagerBackend()\nlatency_budget_ms: 12.5"
    )


def test_the_tuning_log_shows_the_description(aitune_log, cpu_eager_strategy):
    module = ait.Module(torch.nn.Linear(4, 2).eval(), "described", strategy=cpu_eager_strategy)
    ait.tune(module, [torch.randn(4)], batch_sizes=[1, 2], device="cpu")
    text = aitune_log.text
    assert (
        "  strategy:\n    name: One Backend Strategy\n    description: Use only one backend\n"
        "    backend: TorchEagerBackend()" in text
    )


def test_profiling_result_classes():
    throughput = MaxThroughputProfilingResult(selected_batch_size=8, throughput=1000.0)
    assert throughput.metric == 1000.0
    assert throughput.to_json_dict("throughput") == {"throughput": 1000.0, "selected_batch_size": 8}
    latency = MinLatencyProfilingResult(latency=2.5)
    assert latency.metric == 2.5 and latency.selected_batch_size == 1
    budget = LatencyBudgetProfilingResult(selected_batch_size=4, throughput=800.0, latency=5.0)
    assert budget.metric == 800.0
    assert budget.to_json_dict("throughput") == {"throughput": 800.0, "selected_batch_size": 4, "latency": 5.0}
    result = BackendPerfResult("B()", metric=2.0, baseline_metric=1.0, speedup=2.0, passed=True)
    assert result["metric"] == 2.0 and result.get("missing", "d") == "d" and dict(result.to_dict())["passed"]
    with pytest.raises(KeyError):
        result["missing"]


def _quick() -> ProfilingConfig:
    return ProfilingConfig(batch_sizes=[1, 2], measurement_stop_strategy=NumStepsMeasuringStopStrategy(3, 1))


def _tuned(strategy, name):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    module = ait.Module(model, name, strategy=strategy)
    ait.tune(module, [torch.randn(8) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    return module


@pytest.mark.parametrize(
    "factory",
    [MaxThroughputStrategy, MinLatencyStrategy, lambda **kw: LatencyBudgetStrategy(latency_budget_ms=1000.0, **kw)],
)
def test_profiling_strategies_report_one_perf_result_per_candidate(factory):
    strategy = factory(backends=[EAGER, AUTOCAST], profiling_config=_quick())
    strategy.enable_find_max_batch_size(False)
    _tuned(strategy, "profiled")
    results = strategy.perf_validation_results
    assert [r.backend_description for r in results] == [
        "TorchEagerBackend()",
        "TorchEagerBackend(autocast_enabled=True)",
    ]
    for r in results:
        assert isinstance(r, BackendPerfResult)
        assert r.metric > 0 and r.baseline_metric > 0 and r.speedup > 0 and isinstance(r.passed, bool)
        assert r["metric"] == r.metric  # the mapping form aitune's telemetry reads
    measured = [entry for entry in strategy.backend_results if entry.get("success")]
    assert all("selected_batch_size" in entry for entry in measured)


def test_first_wins_reports_a_performance_validation_result(cpu_eager_strategy):
    strategy = ait.FirstWinsStrategy([EAGER], profiling_config=_quick()).enable_find_max_batch_size(False)
    _tuned(strategy, "gated")
    (result,) = strategy.perf_validation_results
    assert isinstance(result, PerformanceValidationMixinResult)
    assert result.backend_description == "TorchEagerBackend()"
    assert result.throughput > 0 and result.baseline_throughput > 0 and result.speedup > 0
    assert result.batch_sizes == [1, 2] and result["passed"] is result.passed
