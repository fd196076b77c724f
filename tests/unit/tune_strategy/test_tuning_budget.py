"""The tuning budget (docs/reference/strategies.md#tuning-budget) with fake backends of configurable build time
and cost: the order of expected cost, a candidate skipped with its reason, a build abandoned at the
deadline (nothing left running, the alarm disarmed), the telemetry fields, the progress text, and
where the budget comes from (a strategy's budget_s wins over config.tuning_budget_s)."""

from __future__ import annotations

import json
import re
import signal
import time

import pytest
import torch

import aitune.torch as ait
from aitune.exceptions import AITuneUserInputError, NoValidBackendError, TuningBudgetExceeded
from aitune.torch.backend import (
    TensorRTBackend,
    TorchEagerBackend,
    TorchInductorAotBackend,
    TorchInductorJitBackend,
    TorchInductorJitBackendConfig,
)
from aitune.torch.config import config
from aitune.torch.global_context import published_batch_size
from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig
from aitune.torch.tune_strategy.budget import TuningBudget, build_deadline, session_started
from aitune.torch.utils.progress import CandidateProgress, LiveLine, current_text, set_candidate

from fake_backend import FakeBackend, FakeBackendConfig, SleepyLinear


@pytest.fixture(autouse=True)
def fresh_fake_records():
    FakeBackend.builds.clear()
    FakeBackend.progress.clear()
    yield
    FakeBackend.builds.clear()
    FakeBackend.progress.clear()


def quick() -> ProfilingConfig:
    return ProfilingConfig(batch_sizes=[1, 2], measurement_stop_strategy=NumStepsMeasuringStopStrategy(3, 1))


def fake(name: str, **kwargs) -> FakeBackend:
    return FakeBackend(FakeBackendConfig(name=name, **kwargs))


def recorded(name: str = "m") -> ait.Module:
    m = ait.Module(SleepyLinear(0.002).eval(), name)
    with torch.no_grad():
        for bs in (1, 2):
            with published_batch_size(bs):
                m(torch.randn(bs, 8))
    return m


def tune(m: ait.Module, strategy) -> None:
    m.tune(device="cpu", strategy=strategy.enable_find_max_batch_size(False))


def built_names() -> list[str]:
    return [text.split("name='")[1].split("'")[0] for text in FakeBackend.builds]


def telemetry_graph() -> dict:
    return json.loads(config.tuning_data_output_path.read_text())["modules"][0]["graphs"][0]


# -- order ---------------------------------------------------------------------------------------
def test_profiling_strategies_walk_candidates_cheapest_first_under_a_budget():
    candidates = [
        fake("trt-like", build_cost=3.0),
        fake("eager-like", build_cost=0.1),
        fake("aot-like", build_cost=1.5),
    ]
    strategy = ait.MinLatencyStrategy(candidates, quick(), budget_s=600)
    tune(recorded(), strategy)
    assert built_names() == ["eager-like", "aot-like", "trt-like"]


def test_without_a_budget_the_list_order_stays():
    candidates = [fake("trt-like", build_cost=3.0), fake("eager-like", build_cost=0.1)]
    tune(recorded(), ait.MaxThroughputStrategy(candidates, quick()))
    assert built_names() == ["trt-like", "eager-like"]


def test_first_wins_keeps_its_order_under_a_budget():
    candidates = [fake("costly", build_cost=3.0, output_scale=2.0), fake("cheap", build_cost=0.1)]
    strategy = ait.FirstWinsStrategy(candidates, profiling_config=quick(), budget_s=600)
    strategy.enable_performance_validation(False)
    m = recorded()
    tune(m, strategy)
    assert built_names() == ["costly", "cheap"]  # the first that passes, in list order
    assert m.tuned_module.backends[0][1].config.name == "cheap"


# -- skip with the reason ------------------------------------------------------------------------
def test_a_candidate_expected_to_overrun_is_skipped_with_the_reason(aitune_log):
    # The first build takes 0.4 s for 1 cost unit; a cost-30 build would take about 12 s, more than
    # is left of 8 s, and is skipped; a second cost-1 candidate still fits.
    candidates = [
        fake("huge", build_cost=30.0, build_delay_s=0.4),
        fake("small", build_cost=1.0, build_delay_s=0.4),
        fake("small-too", build_cost=1.0, build_delay_s=0.4),
    ]
    strategy = ait.MaxThroughputStrategy(candidates, quick(), budget_s=8)
    tune(recorded(), strategy)
    assert built_names() == ["small", "small-too"]
    [skipped] = [r for r in strategy.backend_results if r.get("skipped")]
    assert skipped["backend"].startswith("FakeBackend(name='huge'") and skipped["over_budget"] is True
    assert "expected to take about 1" in skipped["skipped"] and "(relative cost 30)" in skipped["skipped"]
    assert "left of the tuning budget of 8 s (the strategy's budget_s)" in skipped["skipped"]
    assert "⏭️ backend skipped: FakeBackend(name='huge'" in aitune_log.text
    assert "⌛ Tuning budget 8 s (the strategy's budget_s)" in aitune_log.text
    graph = telemetry_graph()
    assert graph["budget"]["budget_s"] == 8 and graph["budget"]["source"] == "the strategy's budget_s"
    assert [o["backend"].split("'")[1] for o in graph["budget"]["order"]] == ["small", "small-too", "huge"]
    assert [s["backend"].split("'")[1] for s in graph["budget"]["skipped"]] == ["huge"]
    assert graph["budget"]["abandoned"] == [] and 0 < graph["budget"]["left_at_end_s"] < 8
    huge = next(b for b in graph["builds"] if b["backend"].startswith("FakeBackend(name='huge'"))
    assert huge["over_budget"] == "skipped" and "expected to take about" in huge["skipped"]


# -- abandon mid-build ---------------------------------------------------------------------------
def test_a_build_still_running_at_the_deadline_is_abandoned(aitune_log):
    candidates = [fake("endless", build_delay_s=60.0), fake("next")]
    strategy = ait.FirstWinsStrategy(candidates, profiling_config=quick(), budget_s=2.0)
    start = time.monotonic()
    with pytest.raises(NoValidBackendError) as info:
        tune(recorded(), strategy)
    assert time.monotonic() - start < 20  # the 60 s build did not run to its end
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # no alarm left armed
    endless, after = strategy.backend_results
    assert "ran out during its build" in endless["abandoned"]
    assert endless["error"].startswith("TuningBudgetExceeded:")
    assert after["over_budget"] and "is spent" in after["skipped"]  # nothing is started after the deadline
    assert built_names() == ["endless"]
    assert "over the tuning budget" in info.value.outcome.message()
    assert "⌛ backend abandoned (log file:" in aitune_log.text
    graph = telemetry_graph()
    [abandoned] = graph["budget"]["abandoned"]
    assert abandoned["backend"].startswith("FakeBackend(name='endless'") and "ran out" in abandoned["reason"]
    build = next(b for b in graph["builds"] if b["backend"].startswith("FakeBackend(name='endless'"))
    assert build["over_budget"] == "abandoned" and build["error"]["type"] == "TuningBudgetExceeded"


def test_a_compile_at_the_first_call_in_the_checks_is_abandoned_at_the_deadline(aitune_log):
    # A JIT backend builds at once and compiles at its first call of a shape: in the numeric check.
    candidates = [fake("jit-like", first_call_delays_s=((1, 60.0),)), fake("next")]
    strategy = ait.FirstWinsStrategy(candidates, profiling_config=quick(), budget_s=2.0)
    start = time.monotonic()
    with pytest.raises(NoValidBackendError):
        tune(recorded(), strategy)
    assert time.monotonic() - start < 20  # the 60 s compile did not run to its end
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    jit, after = strategy.backend_results
    assert "ran out during its checks" in jit["abandoned"] and jit["success"] is False
    assert after["over_budget"] and "is spent" in after["skipped"]
    [abandoned] = telemetry_graph()["budget"]["abandoned"]
    assert abandoned["backend"].startswith("FakeBackend(name='jit-like'")


def test_a_compile_at_the_first_call_in_the_measurement_is_abandoned_at_the_deadline(aitune_log):
    # Without the checks, a JIT backend's first call (its compile) comes in the measurement.
    candidates = [fake("quick"), fake("jit-like", first_call_delays_s=((1, 60.0),)), fake("last")]
    strategy = ait.MinLatencyStrategy(candidates, quick(), budget_s=3.0).enable_correctness_check(False)
    start = time.monotonic()
    m = recorded()
    tune(m, strategy)
    assert time.monotonic() - start < 20
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    quick_result, jit, last = strategy.backend_results
    assert quick_result["success"] is True
    assert "ran out during its measurement" in jit["abandoned"] and jit["success"] is False
    assert "is spent" in last["skipped"]
    assert m.tuned_module.backends[0][1].config.name == "quick"  # the measured candidate still wins
    graph = telemetry_graph()
    [abandoned] = graph["budget"]["abandoned"]
    assert abandoned["backend"].startswith("FakeBackend(name='jit-like'")
    build = next(b for b in graph["builds"] if b["backend"].startswith("FakeBackend(name='jit-like'"))
    assert build["over_budget"] == "abandoned" and build["error"]["type"] == "TuningBudgetExceeded"
    assert "⌛ backend abandoned" in aitune_log.text


def test_an_interrupt_a_compiler_turns_into_its_own_error_still_abandons(aitune_log):
    candidates = [fake("quick"), fake("jit-like", first_call_delays_s=((1, 60.0),), interrupt_as_runtime_error=True)]
    strategy = ait.MinLatencyStrategy(candidates, quick(), budget_s=3.0).enable_correctness_check(False)
    start = time.monotonic()
    tune(recorded(), strategy)
    assert time.monotonic() - start < 20
    _, jit = strategy.backend_results
    assert jit["abandoned"] == "the tuning budget ran out (fake compiler: compilation interrupted)"
    assert [a["backend"].split("'")[1] for a in telemetry_graph()["budget"]["abandoned"]] == ["jit-like"]


def test_the_alarm_repeats_until_the_block_exits():
    # A library that swallows the first interrupt is interrupted again.
    budget = TuningBudget(0.2, "test", time.monotonic())
    interrupts = 0
    start = time.monotonic()
    with pytest.raises(TuningBudgetExceeded):
        with build_deadline(budget, "a build"):
            while time.monotonic() - start < 30:
                try:
                    time.sleep(0.05)
                except TuningBudgetExceeded:
                    interrupts += 1
                    if interrupts == 1:
                        continue  # swallowed once
                    raise
    assert interrupts == 2 and budget.fired and time.monotonic() - start < 15  # 0.2 s, then 5 s later
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_deadline_restores_the_previous_alarm_handler():
    def mine(signum, frame):
        raise AssertionError("must not be called")

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        budget = TuningBudget(30.0, "test", time.monotonic())
        with build_deadline(budget, "a build"):
            assert signal.getitimer(signal.ITIMER_REAL)[0] > 0
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, previous)


# -- where the budget comes from -----------------------------------------------------------------
def test_the_config_budget_applies_and_the_strategy_budget_wins(monkeypatch):
    config.tuning_budget_s = 900
    strategy = ait.MaxThroughputStrategy([fake("a")], quick())
    assert strategy._graph_budget().source == "config.tuning_budget_s"
    assert strategy._graph_budget().budget_s == 900
    strategy = ait.MaxThroughputStrategy([fake("a")], quick(), budget_s=30)
    assert strategy._graph_budget().budget_s == 30 and strategy._graph_budget().source == "the strategy's budget_s"
    assert ait.OneBackendStrategy(fake("a"))._graph_budget() is None  # one candidate: not budgeted
    config.tuning_budget_s = None
    assert ait.MaxThroughputStrategy([fake("a")], quick())._graph_budget() is None


def test_budget_values_are_checked(monkeypatch):
    with pytest.raises(ValueError, match="budget_s must be a number of seconds > 0 or None, got 0"):
        ait.MinLatencyStrategy(budget_s=0)
    with pytest.raises(ValueError, match="tuning_budget_s must be a number of seconds > 0 or None, got -1"):
        config.tuning_budget_s = -1
    monkeypatch.setenv("AITUNE_TUNING_BUDGET_S", "120.5")
    config.reset_to_defaults()
    assert config.tuning_budget_s == 120.5 and config.to_dict()["tuning_budget_s"] == 120.5
    monkeypatch.setenv("AITUNE_TUNING_BUDGET_S", "ten minutes")
    with pytest.raises(AITuneUserInputError, match="AITUNE_TUNING_BUDGET_S must be a number, got 'ten minutes'"):
        config.reset_to_defaults()
    monkeypatch.delenv("AITUNE_TUNING_BUDGET_S")
    config.reset_to_defaults()
    assert config.tuning_budget_s is None


def test_the_budget_counts_from_the_start_of_the_session():
    with session_started(time.monotonic() - 50):
        budget = TuningBudget.for_graph(60, "test")
        assert 9 < budget.left_s() <= 10
        assert "is spent" in TuningBudget.for_graph(40, "test").skip_reason(1.0, False)
    assert TuningBudget.for_graph(60, "test").left_s() > 59  # outside ait.tune: from the graph's start


def test_budget_in_describe_and_json_only_when_set():
    assert "budget_s" not in ait.MaxThroughputStrategy([fake("a")]).to_json_dict()
    strategy = ait.LatencyBudgetStrategy(5.0, [fake("a")], budget_s=90)
    assert strategy.to_json_dict()["budget_s"] == 90 and "budget_s: 90" in strategy.describe()
    assert "budget_s: 120" in ait.FirstWinsStrategy([fake("a")], budget_s=120).describe()


# -- expected build cost -------------------------------------------------------------------------
def test_expected_build_costs_of_the_builtin_backends():
    assert TorchEagerBackend().expected_build_cost() == pytest.approx(0.1)
    assert TorchInductorJitBackend().expected_build_cost() == pytest.approx(1.0)
    assert TorchInductorAotBackend().expected_build_cost() == pytest.approx(1.5)
    assert TensorRTBackend().expected_build_cost() == pytest.approx(3.0)
    jit = TorchInductorJitBackendConfig
    assert TorchInductorJitBackend(jit(mode="max-autotune-no-cudagraphs")).expected_build_cost() == pytest.approx(6.0)
    both = jit(options={"freezing": True, "coordinate_descent_tuning": True})
    assert TorchInductorJitBackend(both).expected_build_cost() == pytest.approx(2.4)


# -- progress ------------------------------------------------------------------------------------
def test_the_progress_line_names_the_candidate_and_the_time_left():
    assert CandidateProgress(2, 5).text() == "candidate 2/5"
    assert CandidateProgress(2, 5, deadline_s=100.0).text(now_s=70.4) == "candidate 2/5, 30 s left"
    assert CandidateProgress(5, 5, deadline_s=100.0).text(now_s=101.0) == "candidate 5/5, budget spent"
    set_candidate(CandidateProgress(1, 3, time.monotonic() + 42))
    try:
        with LiveLine("🔄 X: building", enabled=False):
            assert current_text().startswith("[candidate 1/3, 4") and "🔄 X: building" in current_text()
    finally:
        set_candidate(None)
    assert current_text() is None


def test_each_build_shows_candidate_n_of_m_while_tuning():
    candidates = [fake("a", build_cost=1.0), fake("b", build_cost=2.0)]
    tune(recorded(), ait.MaxThroughputStrategy(candidates, quick(), budget_s=600))
    assert len(FakeBackend.progress) == 2
    for number, text in enumerate(FakeBackend.progress, start=1):
        assert re.match(
            rf"\[candidate {number}/2, (5\d\d|600) s left\] 🔄 FakeBackend\(name='[ab]'.*\): building", text
        ), text
