"""ait.tune(devices=[...]) (docs/guide.md, "Tuning on several GPUs"), tested on the CPU with two
worker processes: the decision equals the one-device decision when measurements are
deterministic (the fake backends' delays are milliseconds, far above timing noise), for
FirstWins (first that passes, in list order) and MaxThroughput (best point); the bookkeeping
matches; a worker that dies costs only its candidates; nothing is left running."""

from __future__ import annotations

import multiprocessing

import pytest
import torch

import aitune.torch as ait
from aitune.torch import module_registry
from aitune.exceptions import AITuneUserInputError
from aitune.torch.module.state import ModuleState
from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig

from fake_backend import FakeBackend, FakeBackendConfig, SleepyLinear
from multi_device_helpers import CrashingBackend, CrashingWhileMeasuredBackend

TWO_CPUS = ["cpu", "cpu"]


def quick_profiling() -> ProfilingConfig:
    return ProfilingConfig(batch_sizes=[1, 2, 4], measurement_stop_strategy=NumStepsMeasuringStopStrategy(5, 2))


def fake(**kwargs) -> FakeBackend:
    return FakeBackend(FakeBackendConfig(**kwargs))


def first_wins_candidates() -> list:
    return [
        fake(name="broken", fail_build=True),
        fake(name="nan", produce_nan=True),
        fake(name="unavailable", unavailable_reason="not installed here"),
        fake(name="wrong", output_scale=1.5),
        fake(name="slow", delay_s=0.015),
        fake(name="good"),
        fake(name="also-good"),
    ]


def tuned(strategy, devices=None, name="m"):
    module_registry.clear()  # each ait.tune here tunes its own module only
    torch.manual_seed(0)
    model = SleepyLinear(0.004).eval()
    m = ait.Module(model, name, strategy=strategy.enable_find_max_batch_size(False))
    ait.tune(m, [torch.randn(8) for _ in range(4)], batch_sizes=[1, 2], device="cpu", devices=devices)
    return m


def content(results: list[dict]) -> list[tuple]:
    """What a candidate's results entry says, without timings, numbers or where it ran."""
    return [(r["backend"], r["success"], (r.get("error") or "").split(":")[0], r.get("skipped")) for r in results]


def test_first_wins_on_two_workers_decides_as_on_one_device(aitune_log):
    sequential = ait.FirstWinsStrategy(first_wins_candidates(), profiling_config=quick_profiling())
    one = tuned(sequential, name="one")
    parallel = ait.FirstWinsStrategy(first_wins_candidates(), profiling_config=quick_profiling())
    two = tuned(parallel, devices=TWO_CPUS, name="two")

    assert one.tuned_module.backends[0][1].config.name == "good"
    assert two.tuned_module.backends[0][1].describe() == one.tuned_module.backends[0][1].describe()
    assert content(parallel.backend_results) == content(sequential.backend_results)
    assert {r["device"] for r in parallel.backend_results} == {"cpu"}
    assert (
        [r["passed"] for r in parallel.perf_validation_results]
        == [r["passed"] for r in sequential.perf_validation_results]
        == [False, True]
    )
    x = torch.randn(3, 8)
    assert torch.equal(two(x), two.module.compute(x)), "the winner serves on the tuning device"
    text = aitune_log.text
    assert "🖥️ Tuning on 2 devices: cpu, cpu" in text
    assert "[worker 0 cpu]" in text and "[worker 1 cpu]" in text, "workers' lines arrive tagged"
    assert "📊 Eager baseline on the tuning device cpu" in text and "Devices differ by" in text
    assert "📦 serving the build of FakeBackend(name='good') from cpu on cpu" in text
    assert multiprocessing.active_children() == [], "the pool's processes end with ait.tune"


def test_max_throughput_on_two_workers_selects_as_on_one_device():
    def candidates():
        return [
            fake(name="slowish", delay_s=0.003),
            fake(name="broken", fail_build=True),
            fake(name="fastest"),
            fake(name="slower", delay_s=0.006),
        ]

    sequential = ait.MaxThroughputStrategy(candidates(), profiling_config=quick_profiling())
    one = tuned(sequential, name="one")
    parallel = ait.MaxThroughputStrategy(candidates(), profiling_config=quick_profiling())
    two = tuned(parallel, devices=TWO_CPUS, name="two")

    assert one.tuned_module.backends[0][1].config.name == "fastest"
    assert two.tuned_module.backends[0][1].config.name == "fastest"
    assert content(parallel.backend_results) == content(sequential.backend_results)
    assert parallel.perf_validation_results[0]["passed"] and parallel.perf_validation_results[0]["speedup"] > 1


def test_nothing_qualifies_on_two_workers_keeps_eager_with_the_same_outcome(aitune_log):
    def candidates():
        return [
            fake(name="broken", fail_build=True),
            fake(name="unavailable", unavailable_reason="absent"),
            fake(name="slow", delay_s=0.015),
        ]

    one = tuned(ait.FirstWinsStrategy(candidates(), profiling_config=quick_profiling()), name="one")
    two = tuned(ait.FirstWinsStrategy(candidates(), profiling_config=quick_profiling()), devices=TWO_CPUS, name="two")
    assert one.state is two.state is ModuleState.PASSTHROUGH
    lines = [line for line in aitune_log.text.splitlines() if "kept eager —" in line]
    assert len(lines) == 2, lines
    for line in lines:
        assert "FakeBackend(name='slow', delay_s=0.015) was" in line


def test_a_worker_that_dies_costs_only_its_candidates(aitune_log):
    strategy = ait.FirstWinsStrategy(
        [CrashingBackend(), fake(name="slow", delay_s=0.015), fake(name="good")], profiling_config=quick_profiling()
    )
    m = tuned(strategy, devices=TWO_CPUS)
    assert m.tuned_module.backends[0][1].config.name == "good"
    crashed = strategy.backend_results[0]
    assert crashed["backend"] == "CrashingBackend()" and not crashed["success"]
    assert "exited with code 3" in crashed["error"]
    assert multiprocessing.active_children() == []


def test_a_worker_that_dies_measuring_gives_its_turn_back():
    """Measurements take turns (one worker measures at a time); a worker that dies in its turn
    must not leave the others waiting for it. Whichever of the crash and the slow candidate's
    measurement comes first, a measurement (of `slow` or of `good`) needs the turn after it."""
    import time

    strategy = ait.FirstWinsStrategy(
        [CrashingWhileMeasuredBackend(), fake(name="slow", delay_s=0.015), fake(name="good")],
        profiling_config=quick_profiling(),
    )
    start = time.monotonic()
    m = tuned(strategy, devices=TWO_CPUS)
    assert time.monotonic() - start < 120, "the other worker waited for a turn that was never given back"
    assert m.tuned_module.backends[0][1].config.name == "good"
    assert "exited with code 4" in strategy.backend_results[0]["error"]


def test_devices_are_checked_with_clear_messages():
    m = ait.Module(SleepyLinear(0.0).eval(), "m")
    with pytest.raises(
        AITuneUserInputError, match=r"devices must be a list of devices, e.g. \['cuda:0', 'cuda:1'\], got 'cpu'"
    ):
        ait.tune(m, [torch.randn(8)], devices="cpu")
    with pytest.raises(AITuneUserInputError, match="devices must name at least one device, got an empty list"):
        ait.tune(m, [torch.randn(8)], devices=[])
    with pytest.raises(AITuneUserInputError, match="devices must all be of one type"):
        ait.tune(m, [torch.randn(8)], devices=["cpu", "meta"])


def test_a_module_that_cannot_be_sent_is_tuned_here_with_a_warning(aitune_log):
    module_registry.clear()
    model = SleepyLinear(0.004).eval()
    model.callback = lambda x: x  # a lambda cannot be pickled, so the module cannot go to a worker
    strategy = ait.FirstWinsStrategy(
        [fake(name="slow", delay_s=0.015), fake(name="good")], profiling_config=quick_profiling()
    ).enable_find_max_batch_size(False)
    m = ait.Module(model, "m", strategy=strategy)
    ait.tune(m, [torch.randn(8) for _ in range(4)], batch_sizes=[1, 2], device="cpu", devices=TWO_CPUS)
    assert m.tuned_module.backends[0][1].config.name == "good"
    assert (
        "⚠️ tuning on several devices sends the module to worker processes, but SleepyLinear cannot be "
        "pickled" in aitune_log.text
    )
    assert "tuning graph `0` on cpu alone" in aitune_log.text
