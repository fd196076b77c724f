"""A CUDA-graph variant and its plain sibling share one build (siblings.py; docs/guide.md
"Strategies"): the second is served from the first's build, a sibling whose build failed is
skipped with the reason, and a failed capture falls back to the plain sibling with the reason
logged once. The fake backend's "CUDA graphs" are FakeGraphServing (tests/fakes/fake_backend.py):
the real runner needs a GPU, and the GPU suite covers it (test_tune_e2e.py)."""

from __future__ import annotations

import pytest
import torch

import aitune.torch as ait
from aitune.exceptions import NoValidBackendError
from aitune.torch.global_context import published_batch_size

from fake_backend import FakeBackend, FakeBackendConfig, SleepyLinear
from .test_out_of_the_box import quick


@pytest.fixture(autouse=True)
def _count_builds():
    FakeBackend.builds.clear()
    yield
    FakeBackend.builds.clear()


def fake(**kwargs) -> FakeBackend:
    return FakeBackend(FakeBackendConfig(**kwargs))


def tuned(strategy, delay_s: float = 0.004, name: str = "m") -> ait.Module:
    m = ait.Module(SleepyLinear(delay_s).eval(), name)
    with torch.no_grad():
        for bs in (1, 2):
            with published_batch_size(bs):
                m(torch.randn(bs, 8))
    strategy.enable_find_max_batch_size(False)
    m.tune(device="cpu", strategy=strategy)
    return m


def results(strategy) -> dict[str, dict]:
    return {r["backend"]: r for r in strategy.backend_results}


def test_profiling_strategy_builds_a_sibling_pair_once_and_measures_both():
    graphs = fake(name="f", use_cuda_graphs=True, delay_s=0.003, graph_delay_s=0.0005)
    plain = fake(name="f", delay_s=0.003, graph_delay_s=0.0005)
    strategy = ait.MinLatencyStrategy([graphs, plain], profiling_config=quick())
    m = tuned(strategy)
    assert FakeBackend.builds == ["FakeBackend(name='f', delay_s=0.003, graph_delay_s=0.0005, use_cuda_graphs=True)"]
    by_name = results(strategy)
    plain_result = by_name["FakeBackend(name='f', delay_s=0.003, graph_delay_s=0.0005)"]
    assert plain_result["success"] and plain_result["shared_build_of"].endswith("use_cuda_graphs=True)")
    assert plain_result["latency"] > by_name[graphs.describe()]["latency"]
    selected = m.tuned_module.backends[0][1]
    assert selected.config.use_cuda_graphs
    x = torch.randn(2, 8)
    assert torch.equal(m(x), m.module.compute(x))


def test_plain_sibling_wins_and_keeps_serving_after_the_graph_variant_is_released():
    strategy = ait.MinLatencyStrategy(
        [fake(name="f", use_cuda_graphs=True, graph_delay_s=0.006), fake(name="f", graph_delay_s=0.006)],
        profiling_config=quick(),
    )
    m = tuned(strategy)
    selected = m.tuned_module.backends[0][1]
    assert not selected.config.use_cuda_graphs and selected.is_active
    assert len(FakeBackend.builds) == 1
    x = torch.randn(3, 8)
    assert torch.equal(m(x), m.module.compute(x))  # the shared build survived the loser's release


def test_failed_capture_falls_back_to_the_plain_sibling_without_a_rebuild(aitune_log):
    strategy = ait.FirstWinsStrategy(
        [
            fake(name="f", use_cuda_graphs=True, capture_fails=True),
            fake(name="other", fail_build=True),
            fake(name="f", capture_fails=True),
        ],
        profiling_config=quick(),
    )
    m = tuned(strategy)
    selected = m.tuned_module.backends[0][1]
    assert selected.describe() == "FakeBackend(name='f', capture_fails=True)"
    assert FakeBackend.builds == [
        "FakeBackend(name='f', capture_fails=True, use_cuda_graphs=True)",
        "FakeBackend(name='other', fail_build=True)",
    ]
    failure = results(strategy)["FakeBackend(name='f', capture_fails=True, use_cuda_graphs=True)"]["error"]
    assert failure.startswith("CudaGraphCaptureError: CUDA graph capture failed for FakeBackend(")
    assert "operation not permitted when stream is capturing" in failure
    assert aitune_log.text.count("operation not permitted when stream is capturing") == 1, "logged once"
    assert "(serves the build of FakeBackend(name='f', capture_fails=True, use_cuda_graphs=True))" in aitune_log.text


def test_sibling_of_a_failed_build_is_skipped_with_the_reason(aitune_log):
    strategy = ait.FirstWinsStrategy(
        [fake(name="f", use_cuda_graphs=True, fail_build=True), fake(name="f", fail_build=True), fake(name="good")],
        profiling_config=quick(),
    )
    m = tuned(strategy)
    assert m.tuned_module.backends[0][1].describe() == "FakeBackend(name='good')"
    assert FakeBackend.builds == [
        "FakeBackend(name='f', fail_build=True, use_cuda_graphs=True)",
        "FakeBackend(name='good')",
    ]
    skipped = results(strategy)["FakeBackend(name='f', fail_build=True)"]["skipped"]
    assert skipped.startswith(
        "its serving sibling FakeBackend(name='f', fail_build=True, use_cuda_graphs=True) "
        "failed to build (RuntimeError: fake build failure (f))"
    )
    assert "⏭️ backend skipped: FakeBackend(name='f', fail_build=True) — its serving sibling" in aitune_log.text


def test_gate_rejected_graph_variant_keeps_its_build_for_the_plain_sibling_later_in_the_list():
    slow_graphs = fake(name="f", use_cuda_graphs=True, graph_delay_s=0.02)  # slower than eager through "graphs"
    strategy = ait.FirstWinsStrategy(
        [slow_graphs, fake(name="other", delay_s=0.02), fake(name="f", graph_delay_s=0.02)], profiling_config=quick()
    )
    m = tuned(strategy, delay_s=0.006)
    assert m.tuned_module.backends[0][1].describe() == "FakeBackend(name='f', graph_delay_s=0.02)"
    assert FakeBackend.builds == [slow_graphs.describe(), "FakeBackend(name='other', delay_s=0.02)"]


def test_wrong_outputs_in_both_serving_modes_cost_one_build():
    strategy = ait.FirstWinsStrategy(
        [fake(name="f", use_cuda_graphs=True, output_scale=2.0), fake(name="f", output_scale=2.0)],
        profiling_config=quick(),
    )
    with pytest.raises(NoValidBackendError) as info:
        tuned(strategy)
    assert len(FakeBackend.builds) == 1
    assert info.value.outcome.failed == 2
    assert all("CorrectnessNumericError" in r["error"] for r in strategy.backend_results)


def test_unused_derived_siblings_are_released():
    strategy = ait.FirstWinsStrategy(
        [
            fake(name="f", use_cuda_graphs=True, capture_fails=True),
            fake(name="good"),
            fake(name="f", capture_fails=True),
        ],
        profiling_config=quick(),
    )
    m = tuned(strategy)
    assert m.tuned_module.backends[0][1].describe() == "FakeBackend(name='good')"
    assert strategy._siblings._held == {}
