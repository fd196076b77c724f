"""Strategy outcomes with a fake backend (docs/reference/strategies.md, docs/reference/validation.md): build failure,
wrong numbers, NaN, slower than eager, faster than eager, a latency budget nobody meets — each with the documented
outcome and message."""

from __future__ import annotations

import pytest
import torch

import aitune.torch as ait
from aitune.exceptions import (
    BackendUnavailableError,
    CorrectnessNumericError,
    CorrectnessValueError,
    NoValidBackendError,
)
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.global_context import published_batch_size
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState
from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig
from aitune.torch.validation import NumericTolerance

from fake_backend import FakeBackend, FakeBackendConfig, SleepyLinear

FAST = dict(delay_s=0.0)


def quick_profiling() -> ProfilingConfig:
    # Few calls: the fakes differ by milliseconds, far above timing noise.
    return ProfilingConfig(batch_sizes=[1, 2, 4], measurement_stop_strategy=NumStepsMeasuringStopStrategy(5, 2))


def fake(**kwargs) -> FakeBackend:
    return FakeBackend(FakeBackendConfig(**kwargs))


def recorded(delay_s: float = 0.004, name: str = "m", **module_kwargs) -> ait.Module:
    model = SleepyLinear(delay_s).eval()
    m = ait.Module(model, name, **module_kwargs)
    with torch.no_grad():
        for bs in (1, 2):
            with published_batch_size(bs):
                m(torch.randn(bs, 8))
    return m


def tune(m: ait.Module, strategy) -> None:
    strategy.enable_find_max_batch_size(False)
    m.tune(device="cpu", strategy=strategy)


# -- FirstWins ---------------------------------------------------------------------------------
def test_first_wins_skips_failures_and_picks_the_first_good_fast_backend(aitune_log):
    m = recorded()
    strategy = ait.FirstWinsStrategy(
        [
            fake(name="broken", fail_build=True),
            fake(name="nan", produce_nan=True),
            fake(name="wrong", output_scale=1.5),
            fake(name="good"),
            fake(name="also-good"),
        ],
        profiling_config=quick_profiling(),
    )
    tune(m, strategy)
    selected = m.tuned_module.backends[0][1]
    assert selected.config.name == "good"
    results = {r["backend"]: r for r in strategy.backend_results}
    assert not results["FakeBackend(name='broken', fail_build=True)"]["success"]
    assert "CorrectnessValueError" in results["FakeBackend(name='nan', produce_nan=True)"]["error"]
    assert "CorrectnessNumericError" in results["FakeBackend(name='wrong', output_scale=1.5)"]["error"]
    assert "❌ backend failed (log file:" in aitune_log.text
    assert "⚡ speedup:" in aitune_log.text
    x = torch.randn(3, 8)
    assert torch.equal(m(x), m.module.compute(x))


def test_first_wins_build_failure_goes_to_build_log(tmp_path):
    m = recorded()
    strategy = ait.FirstWinsStrategy(
        [fake(name="broken", fail_build=True), fake(name="good")], profiling_config=quick_profiling()
    )
    tune(m, strategy)
    logs = list(tmp_path.rglob("build.log"))
    broken = [p for p in logs if "fake build failure (broken)" in p.read_text()]
    assert broken, "the failing build's traceback is in its build.log"
    assert "the build fails as configured" in broken[0].read_text()  # the build's own output


def test_first_wins_rejects_a_backend_slower_than_eager():
    m = recorded(delay_s=0.001)
    strategy = ait.FirstWinsStrategy([fake(name="slow", delay_s=0.01)], profiling_config=quick_profiling())
    with pytest.raises(NoValidBackendError, match="There is no valid backend for a module: m, graph_spec: 0"):
        tune(m, strategy)
    assert strategy.perf_validation_results[0]["passed"] is False
    assert strategy.perf_validation_results[0]["speedup"] < 1.0


def test_first_wins_skips_unavailable_backends_with_the_reason(aitune_log):
    m = recorded()
    strategy = ait.FirstWinsStrategy(
        [
            fake(name="gone", unavailable_reason="fakelib is not installed. Please install `fakelib`."),
            fake(name="good"),
        ],
        profiling_config=quick_profiling(),
    )
    tune(m, strategy)
    assert "⏭️ backend skipped: FakeBackend(name='gone'" in aitune_log.text
    assert "fakelib is not installed. Please install `fakelib`." in aitune_log.text


def test_ait_tune_puts_a_module_without_valid_backend_into_passthrough():
    model = SleepyLinear(0.0)
    m = ait.Module(
        model, "pt", strategy=ait.FirstWinsStrategy([fake(fail_build=True)], profiling_config=quick_profiling())
    )
    ait.tune(m, [torch.randn(8) for _ in range(2)], device="cpu")
    assert m.state is ModuleState.PASSTHROUGH
    x = torch.randn(2, 8)
    assert torch.equal(m(x), model.compute(x))


# -- OneBackend --------------------------------------------------------------------------------
def test_one_backend_propagates_build_and_correctness_errors():
    with pytest.raises(RuntimeError, match="fake build failure"):
        tune(recorded(name="a"), ait.OneBackendStrategy(fake(fail_build=True), profiling_config=quick_profiling()))
    with pytest.raises(CorrectnessValueError, match="contains NaN values"):
        tune(recorded(name="b"), ait.OneBackendStrategy(fake(produce_nan=True), profiling_config=quick_profiling()))
    with pytest.raises(BackendUnavailableError, match="fakelib"):
        tune(
            recorded(name="c"),
            ait.OneBackendStrategy(fake(unavailable_reason="fakelib missing"), profiling_config=quick_profiling()),
        )


def test_one_backend_below_the_gate_serves_the_eager_baseline(aitune_log):
    m = recorded(delay_s=0.001)
    tune(m, ait.OneBackendStrategy(fake(delay_s=0.01), profiling_config=quick_profiling()))
    assert isinstance(m.tuned_module.backends[0][1], TorchEagerBackend)
    assert "ℹ️ Baseline was selected" in aitune_log.text


def test_one_backend_without_baseline_raises_the_spec_message(monkeypatch):
    m = recorded(delay_s=0.001)
    strategy = ait.OneBackendStrategy(fake(delay_s=0.01), profiling_config=quick_profiling())

    def no_baseline(ctx):  # the baseline's build failed: the gate has nothing to fall back to
        strategy._baseline_throughput = 1e9
        strategy._baseline_backend = None

    monkeypatch.setattr(strategy, "_pre_tune", no_baseline)
    with pytest.raises(
        NoValidBackendError,
        match=r"Backend 'FakeBackend\(delay_s=0.01\)' failed the performance "
        r"gate but no TorchEager baseline is available to fall back to\.",
    ):
        tune(m, strategy)


def test_first_wins_accepts_a_candidate_whose_gate_run_is_out_of_memory_at_once(aitune_log):
    # Out of memory at the first gate batch size leaves the gate with no measurement at all: like any
    # other failed gate measurement, the candidate is accepted (and the log says why), not a crash.
    calibration = recorded(name="calibrate")
    tune(
        calibration,
        ait.FirstWinsStrategy([fake(name="count")], profiling_config=quick_profiling()).enable_performance_validation(
            False
        ),
    )
    calls_before_the_gate = calibration.tuned_module.backends[0][1].calls
    m = recorded(name="m")
    tune(
        m,
        ait.FirstWinsStrategy(
            [fake(name="oom", oom_after_calls=calls_before_the_gate)], profiling_config=quick_profiling()
        ),
    )
    selected = m.tuned_module.backends[0][1]
    assert isinstance(selected, FakeBackend) and selected.config.name == "oom"
    assert "accepted without the performance gate" in aitune_log.text
    assert "measured no batch size (stopped by out of memory at batch size 1)" in aitune_log.text


def test_numeric_error_names_path_sample_and_tolerance():
    m = recorded()
    with pytest.raises(CorrectnessNumericError) as info:
        tune(m, ait.OneBackendStrategy(fake(output_offset=0.5), profiling_config=quick_profiling()))
    message = str(info.value)
    assert message.startswith("Output output differs from eager reference on sample 0: rel_l2=")
    assert "precision class fp32" in message and "vs allowed 0.000%" in message


def test_tolerances_follow_backend_then_strategy_then_defaults():
    loose = NumericTolerance(atol=1.0, rtol=1.0, max_rel_l2=10.0, max_mismatch_fraction=1.0)
    m = recorded(name="strategy-tol")
    tune(
        m,
        ait.OneBackendStrategy(fake(output_offset=0.01), profiling_config=quick_profiling())
        .enable_performance_validation(False)
        .set_tolerance(loose),
    )
    assert m.state is ModuleState.TUNED
    m2 = recorded(name="backend-tol")
    backend = FakeBackend(FakeBackendConfig(output_offset=0.01), tolerance=loose)
    tune(m2, ait.OneBackendStrategy(backend, profiling_config=quick_profiling()).enable_performance_validation(False))
    assert m2.state is ModuleState.TUNED
    m3 = recorded(name="numeric-off")
    tune(
        m3,
        ait.OneBackendStrategy(fake(output_offset=0.01), profiling_config=quick_profiling())
        .enable_performance_validation(False)
        .enable_numeric_check(False),
    )
    assert m3.state is ModuleState.TUNED


def test_fp16_class_uses_the_fp16_tolerance():
    m = recorded(name="fp16")
    # 0.1% off: beyond fp32's rel_l2 1e-4 but inside fp16's 1e-2.
    tune(
        m,
        ait.OneBackendStrategy(
            fake(output_scale=1.001, precision="fp16"), profiling_config=quick_profiling()
        ).enable_performance_validation(False),
    )
    assert m.state is ModuleState.TUNED


# -- profiling strategies ----------------------------------------------------------------------
def test_max_throughput_picks_the_fastest_correct_backend():
    m = recorded(delay_s=0.004)
    strategy = ait.MaxThroughputStrategy(
        [fake(name="slowish", delay_s=0.003), fake(name="fastest"), fake(name="wrong", output_scale=2.0)],
        profiling_config=quick_profiling(),
    )
    tune(m, strategy)
    assert m.tuned_module.backends[0][1].config.name == "fastest"
    # One result per measured candidate; the winner's passed the gate.
    [winner] = [r for r in strategy.perf_validation_results if "'fastest'" in r["backend_description"]]
    assert winner["passed"] is True


def test_max_throughput_falls_back_to_eager_when_nothing_beats_it():
    m = recorded(delay_s=0.001)
    tune(m, ait.MaxThroughputStrategy([fake(name="slow", delay_s=0.01)], profiling_config=quick_profiling()))
    assert isinstance(m.tuned_module.backends[0][1], TorchEagerBackend)


def test_max_throughput_without_validation_and_candidates_raises():
    m = recorded()
    strategy = ait.MaxThroughputStrategy([fake(fail_build=True)], profiling_config=quick_profiling())
    strategy.enable_performance_validation(False)
    with pytest.raises(NoValidBackendError, match="No correct backend found"):
        tune(m, strategy)


def test_min_latency_picks_the_lowest_latency():
    m = recorded(delay_s=0.004)
    strategy = ait.MinLatencyStrategy(
        [fake(name="a", delay_s=0.002), fake(name="b")], profiling_config=quick_profiling()
    )
    m.tune(device="cpu", strategy=strategy)
    assert m.tuned_module.backends[0][1].config.name == "b"


def test_latency_budget_nobody_meets_raises_before_eager_fallback():
    m = recorded(delay_s=0.003)
    strategy = ait.LatencyBudgetStrategy(0.5, [fake(name="a", delay_s=0.002)], profiling_config=quick_profiling())
    with pytest.raises(NoValidBackendError, match=r"^No backend satisfied latency budget 0\.500 ms$"):
        tune(m, strategy)


def test_latency_budget_picks_the_backend_within_budget():
    m = recorded(delay_s=0.02)
    strategy = ait.LatencyBudgetStrategy(
        10.0, [fake(name="too-slow", delay_s=0.015), fake(name="ok")], profiling_config=quick_profiling()
    )
    tune(m, strategy)
    assert m.tuned_module.backends[0][1].config.name == "ok"


def test_latency_budget_must_be_positive():
    with pytest.raises(ValueError, match="latency_budget_ms must be positive"):
        ait.LatencyBudgetStrategy(0)


# -- max batch search --------------------------------------------------------------------------
def test_max_batch_search_extends_the_graph_max_shapes(aitune_log):
    config.device_after_tuning = "cpu"  # the ahead-of-time stand-in still serves the module's weights
    m = recorded(delay_s=0.0)
    strategy = ait.OneBackendStrategy(
        fake(ahead_of_time=True),
        profiling_config=ProfilingConfig(
            batch_sizes=[1, 2, 4, 8], measurement_stop_strategy=NumStepsMeasuringStopStrategy(3, 1)
        ),
    )
    strategy.enable_performance_validation(False)
    m.tune(device="cpu", strategy=strategy)
    spec = m.graph_specs[0].input_spec.tensors[0].spec
    assert spec.max_shape[0] in (2, 4, 8) and "✅ Max batch size for module `m` graph `0` is" in aitune_log.text
    assert spec.max_shape[0] >= 2


def test_strategies_have_the_spec_defaults():
    assert ait.OneBackendStrategy(fake()).min_speedup_threshold_percent == 1.0
    assert ait.FirstWinsStrategy([fake()]).min_speedup_threshold_percent == 1.0
    assert ait.MaxThroughputStrategy([fake()]).min_speedup_threshold_percent == 0.0
    assert ait.MinLatencyStrategy([fake()])._find_max_batch_size is False
    s = ait.MaxThroughputStrategy([fake()])
    assert s.enable_correctness_check(False) is s and s.enable_numeric_check() is s
    assert s.profiling_config.batch_sizes == [2**n for n in range(21)]


# -- the error beside the speed, and a metric of the user's own --------------------------------------
def test_profiling_strategies_log_each_candidates_error_beside_its_speed(aitune_log):
    m = recorded(delay_s=0.004)
    strategy = ait.MinLatencyStrategy(
        [fake(name="close", output_scale=1.002, precision="int8")], profiling_config=quick_profiling()
    ).enable_performance_validation(False)
    tune(m, strategy)
    [result] = strategy.backend_results
    assert result["correctness"]["precision_class"] == "int8"
    assert result["correctness"]["rel_l2_error"] == pytest.approx(0.002, rel=0.05)
    line = next(text for text in aitune_log.text.splitlines() if "backend profiled" in text)
    assert ", error vs eager (int8): rel_l2=0.002" in line, line


class RejectsScaled(ait.MinLatencyStrategy):
    """AITune's hook with a metric of its own: any output more than 0.1 % off the sample's eager
    output (which a loose int8 budget would accept) fails the candidate."""

    seen: list = []

    def check_correctness(self, backend, name, graph_spec, data):
        self.seen.append((backend.describe(), name, graph_spec.name, len(data)))
        for sample in data:
            with torch.no_grad():
                out = backend.infer(*sample.args, **sample.kwargs)
            ref = sample.args[0] @ self.weight.T + self.bias
            if float((out - ref).abs().max()) > 1e-3 * float(ref.abs().max()):
                raise ValueError(f"{backend.describe()} is more than 0.1 % off")


def test_a_strategy_subclass_judges_candidates_by_its_own_check_correctness(aitune_log):
    m = recorded(delay_s=0.004)
    strategy = RejectsScaled(
        [fake(name="off", output_scale=1.01, precision="int8"), fake(name="exact", delay_s=0.001)],
        profiling_config=quick_profiling(),
    ).enable_performance_validation(False)
    strategy.weight, strategy.bias = m.linear.weight.detach(), m.linear.bias.detach()
    RejectsScaled.seen = []
    tune(m, strategy)
    assert [s[0] for s in RejectsScaled.seen] == [
        "FakeBackend(name='off', output_scale=1.01, precision='int8')",
        "FakeBackend(name='exact', delay_s=0.001)",
    ]
    assert RejectsScaled.seen[0][1] == "m" and RejectsScaled.seen[0][3] >= 1
    results = {r["backend"]: r for r in strategy.backend_results}
    assert "is more than 0.1 % off" in results["FakeBackend(name='off', output_scale=1.01, precision='int8')"]["error"]
    assert m.tuned_module.backends[0][1].config.name == "exact"
