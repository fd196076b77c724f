"""TorchInductorJitBackend with dynamic=None on a graph with dynamic axes: the dynamic build is
timed against static per-shape graphs and the faster is kept (docs/reference/backends.md#per-backend-behaviour,
docs/reference/measurement.md#one-measured-call).

Real CPU Inductor compiles of a tiny MLP; the timing-dependent choice is forced where a test
needs one particular variant."""

from __future__ import annotations

import copy
import re

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend import TorchInductorJitBackend, TorchInductorJitBackendConfig
from aitune.torch.backend.torch_inductor_jit import torch_inductor_jit_backend as jit_module
from aitune.torch.backend.torch_inductor_jit.torch_inductor_jit_backend import shape_key
from aitune.torch.config import config as aitune_config
from aitune.torch.module.state import ModuleState

LINE = "dynamic=None: specialised per shape"
RECOMPILE = "recompiling the tuned forward"
DEFERRED = "compiling the dynamic build now"


def _strategy(backend):
    return ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def _dataset(n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(6, generator=g) for _ in range(n)]


def _tune(config=None, batch_sizes=(1, 3)):
    # Every recorded call is stored, so the specialised variant covers batch 1 and batch 3 (it
    # covers the stored samples' shapes only).
    aitune_config.max_num_samples_stored = float("inf")
    model = _mlp()
    reference = copy.deepcopy(model)
    m = ait.Module(model, "mlp", strategy=_strategy(TorchInductorJitBackend(config)))
    ait.tune(m, _dataset(), batch_sizes=list(batch_sizes), device="cpu")
    assert m.state is ModuleState.TUNED
    [(_, backend)] = m.tuned_module.backends
    assert isinstance(backend, TorchInductorJitBackend)
    return m, backend, reference


def _assert_serves(m, reference, sizes=(1, 2, 3)):
    for bs in sizes:
        x = torch.randn(bs, 6)
        with torch.no_grad():
            torch.testing.assert_close(m(x), reference(x), atol=1e-5, rtol=1e-5)


def _policy_lines(log):
    return [r for r in log.records if LINE in r.getMessage()]


def test_shape_key():
    x = torch.zeros(2, 3)
    assert shape_key((x,), {}) == ((2, 3),)
    assert shape_key((x,), {"flag": True, "y": torch.zeros(4)}) == ((2, 3), True, (4,))
    assert shape_key((x,), {}) != shape_key((torch.zeros(3, 3),), {})


def test_dynamic_none_compares_and_keeps_the_faster(aitune_log):
    m, backend, reference = _tune(batch_sizes=(2, 3))  # no size-1 axis: both shapes are timed
    assert backend.dynamic_choice in {"specialised", "dynamic"}
    totals = backend.dynamic_totals_ms
    assert set(totals) == {"specialised", "dynamic"} and all(v > 0 for v in totals.values())
    expected = "specialised" if totals["specialised"] < totals["dynamic"] else "dynamic"
    assert backend.dynamic_choice == expected
    [line] = _policy_lines(aitune_log)
    assert line.levelname == "INFO" and line.name == "aitune"
    assert f"over 2 shapes; keeping {expected}" in line.getMessage()  # [2, 6] and [3, 6] (the stored samples)
    assert backend.describe() == "TorchInductorJitBackend()"  # the choice is not config
    assert backend.compiled_dynamic is True  # shapes outside the specialised set: the dynamic build
    _assert_serves(m, reference, sizes=(2, 3, 5))
    assert RECOMPILE not in aitune_log.text


@pytest.mark.parametrize("dynamic", [True, False])
def test_explicit_dynamic_does_not_compare(aitune_log, dynamic):
    m, backend, reference = _tune(TorchInductorJitBackendConfig(dynamic=dynamic))
    assert backend.dynamic_choice is None and backend.dynamic_totals_ms is None
    assert backend.compiled_dynamic is dynamic
    assert not _policy_lines(aitune_log)
    _assert_serves(m, reference, sizes=(1, 3))


def test_static_graph_does_not_compare(aitune_log):
    m, backend, reference = _tune(batch_sizes=(2,))
    assert backend.dynamic_choice is None and backend.compiled_dynamic is False
    assert not _policy_lines(aitune_log)
    _assert_serves(m, reference, sizes=(2,))


def _force(monkeypatch, winner):
    """Makes the comparison pick `winner` whatever the timings."""

    def median_ms(self, fn, call, cuda_index, use_device_time):
        is_route = getattr(fn, "__func__", None) is TorchInductorJitBackend._route
        return 1.0 if is_route == (winner == "specialised") else 2.0

    monkeypatch.setattr(TorchInductorJitBackend, "_median_ms", median_ms)


def test_specialised_dispatches_by_shape_and_survives_reactivation(aitune_log, monkeypatch):
    _force(monkeypatch, "specialised")
    m, backend, reference = _tune(batch_sizes=(2, 3))
    assert backend.dynamic_choice == "specialised"
    assert backend.dynamic_totals_ms == {"specialised": 2.0, "dynamic": 4.0}
    assert "specialised per shape 2.000 ms vs dynamic 4.000 ms over 2 shapes; keeping specialised" in aitune_log.text
    assert sorted(backend.specialised_shapes) == [((2, 6),), ((3, 6),)]

    calls = []
    specialised = backend._specialised
    backend._specialised = lambda *a, **k: calls.append(a[0].shape[0]) or specialised(*a, **k)
    _assert_serves(m, reference, sizes=(2, 3, 4, 5))
    assert calls == [2, 3]  # batch 4 and 5 were served by the dynamic build
    assert RECOMPILE not in aitune_log.text

    backend.deactivate()
    assert backend._specialised is None and backend._compiled is None
    backend.activate()
    assert backend.dynamic_choice == "specialised" and backend._specialised is not None
    for bs in (2, 3, 4):
        x = torch.randn(bs, 6)
        with torch.no_grad():
            torch.testing.assert_close(backend.infer(x), reference(x), atol=1e-5, rtol=1e-5)
    assert RECOMPILE not in aitune_log.text


def test_dynamic_kept_drops_the_specialised_variant(aitune_log, monkeypatch):
    _force(monkeypatch, "dynamic")
    m, backend, reference = _tune(batch_sizes=(1, 2, 3))  # [1, 6] untimed; [2, 6] and [3, 6] timed
    assert backend.dynamic_choice == "dynamic"
    assert "over 2 shapes; keeping dynamic" in aitune_log.text
    assert backend._specialised is None and backend.specialised_shapes == []
    _assert_serves(m, reference)  # batch 1 too: the dynamic build was warmed up on it after the choice
    assert RECOMPILE not in aitune_log.text


def _tune_default_sample(model):
    m = ait.Module(model, "one", strategy=_strategy(TorchInductorJitBackend()))
    ait.tune(m, _dataset(), batch_sizes=[1, 3], device="cpu")  # one stored sample (the default), at batch 1
    [(_, backend)] = m.tuned_module.backends
    return m, backend


def test_a_size_one_stored_shape_is_specialised_untimed_with_one_dynamic_compile(aitune_log, monkeypatch):
    """The default (one stored sample, at batch 1): Dynamo would specialise batch 1 in the dynamic
    build too, so the shape goes to the static graph untimed and the dynamic build compiles once,
    on the widened sample (docs/reference/backends.md#per-backend-behaviour)."""
    timed = []
    monkeypatch.setattr(TorchInductorJitBackend, "_median_ms", lambda self, *a: timed.append(a) or 1.0)
    model = _mlp()
    reference = copy.deepcopy(model)
    torch._dynamo.utils.counters.clear()
    m, backend = _tune_default_sample(model)
    assert backend.dynamic_choice == "specialised" and backend.dynamic_totals_ms is None and timed == []
    assert backend.specialised_shapes == [((1, 6),)], "batch 3 is served by the dynamic build"
    assert "the 1 stored shape(s) have size-1 dynamic axes" in aitune_log.text
    # Two graphs: the dynamic one (on the widened sample, compiled when the numeric check first
    # called at batch 3) and the static batch-1 one; before, the dynamic build also compiled a
    # batch-1 graph of its own.
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2
    _assert_serves(m, reference, sizes=(1, 2, 3, 5))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2
    assert RECOMPILE not in aitune_log.text


def test_a_size_one_shape_falls_back_to_a_warmed_dynamic_build(aitune_log, monkeypatch):
    """When the specialised compile fails, the dynamic build serves batch 1 too, and is warmed up on
    it first: no recompile on the first real call."""

    def fail(self):
        raise RuntimeError("no static graph")

    monkeypatch.setattr(TorchInductorJitBackend, "_compile_specialised", fail)
    model = _mlp()
    reference = copy.deepcopy(model)
    m, backend = _tune_default_sample(model)
    assert backend.dynamic_choice == "dynamic" and backend._specialised is None
    assert "no specialised per-shape variant (RuntimeError: no static graph); keeping dynamic" in aitune_log.text
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    _assert_serves(m, reference, sizes=(1, 2, 3))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs  # batch 1 was compiled in the build
    assert RECOMPILE not in aitune_log.text


def test_too_many_shapes_for_the_recompile_limit_keeps_dynamic(aitune_log, monkeypatch):
    monkeypatch.setattr(jit_module, "recompile_limit", lambda: 2)
    m, backend, reference = _tune()
    assert backend.dynamic_choice == "dynamic" and backend.dynamic_totals_ms is None
    assert "reach Dynamo's recompile limit (2)" in aitune_log.text
    assert not _policy_lines(aitune_log)
    _assert_serves(m, reference)


def _restarted_traces() -> int:
    """Dynamo's second (and later) attempts at tracing a frame in this process: a restart of the
    analysis re-traces the whole model (torch._dynamo.convert_frame times each attempt by name)."""
    from torch._dynamo.utils import compilation_time_metrics

    return sum(
        len(times)
        for name, times in compilation_time_metrics.items()
        if re.fullmatch(r"compile_attempt_[1-9]\d*", name)
    )


class BatchNormNet(torch.nn.Module):
    """BatchNorm's eps is a Python float that the operator needs as a number: in a dynamic=True
    compile with torch's default specialize_float=False it was specialised late, and Inductor's
    tensorify pass restarted the whole trace (TensorifyScalarRestartAnalysis)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x))).flatten(1)


def test_a_dynamic_build_traces_the_model_once_in_strict_mode():
    """Run alone on the code before the fix, the build restarted once (this read 1)."""
    assert aitune_config.strict_mode  # the default
    torch.manual_seed(0)
    model = BatchNormNet().eval()
    reference = copy.deepcopy(model)
    m = ait.Module(
        model, "bn", strategy=_strategy(TorchInductorJitBackend(TorchInductorJitBackendConfig(dynamic=True)))
    )
    # torch remembers, per process, which float symbols a restart specialised (and then does not
    # restart for them again): forget them, so an earlier test's restart cannot hide this one's.
    from torch._dynamo.symbolic_convert import TensorifyState

    TensorifyState.clear()
    before = _restarted_traces()
    ait.tune(m, [torch.randn(3, 8, 8) for _ in range(2)], batch_sizes=[2], device="cpu")
    assert m.state is ModuleState.TUNED
    [(_, backend)] = m.tuned_module.backends
    assert backend.compiled_dynamic is True
    # Strict mode: floats are part of the graph's identity, so they are specialised up front and
    # nothing restarts.
    assert _restarted_traces() - before == 0
    for bs in (2, 5):
        x = torch.randn(bs, 3, 8, 8)
        with torch.no_grad():
            torch.testing.assert_close(m(x), reference(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("tuned_choice", ["specialised", "dynamic"])
def test_a_load_serves_the_variant_chosen_when_tuned(aitune_log, monkeypatch, tmp_path, tuned_choice):
    """A checkpoint (or a results-store file) records the choice; the rebuild follows it instead of
    timing the two variants again, where the other might come out faster this time."""
    _force(monkeypatch, tuned_choice)
    m, backend, reference = _tune(batch_sizes=(2, 3))
    assert backend.dynamic_choice == tuned_choice
    path = tmp_path / "mlp.ait"
    ait.save(m, path)
    other = "dynamic" if tuned_choice == "specialised" else "specialised"
    _force(monkeypatch, other)  # a second comparison would now pick the other variant
    timed = []
    monkeypatch.setattr(TorchInductorJitBackend, "_median_ms", lambda self, *a: timed.append(a) or 1.0)
    loaded = ait.load(_mlp(), path)
    [(_, restored)] = loaded.tuned_module.backends
    assert restored.dynamic_choice == tuned_choice and timed == []
    assert (restored._specialised is None) == (tuned_choice == "dynamic")  # no unused static graphs compiled
    assert "as chosen when tuned" in aitune_log.text
    _assert_serves(loaded, reference, sizes=(2, 3, 4))
    assert RECOMPILE not in aitune_log.text


def test_a_load_of_a_specialised_choice_compiles_the_dynamic_build_at_its_first_call(aitune_log, monkeypatch, tmp_path):
    """A rebuild that serves every stored shape by static graphs (here a load; a results-store
    reuse alike) compiles only those: the dynamic build, which serves shapes tuning never stored,
    compiles at the first such call, logged once, in the build's context (with `freezing` the
    switch Dynamo reads while tracing; Inductor's freezing pass is watched, not replaced)."""
    import torch._inductor.freezing as freezing

    frozen = []
    real_freeze = freezing.freeze
    monkeypatch.setattr(freezing, "freeze", lambda *a, **k: frozen.append(1) or real_freeze(*a, **k))
    model = _mlp()
    reference = copy.deepcopy(model)
    config = TorchInductorJitBackendConfig(freezing=True)
    m = ait.Module(model, "frozen", strategy=_strategy(TorchInductorJitBackend(config)))
    ait.tune(m, _dataset(), batch_sizes=[1, 3], device="cpu")  # one stored sample, at batch 1
    [(_, backend)] = m.tuned_module.backends
    assert backend.dynamic_choice == "specialised"
    path = tmp_path / "frozen.ait"
    ait.save(m, path)

    torch._dynamo.utils.counters.clear()
    frozen.clear()
    deferred_before = aitune_log.text.count(DEFERRED)
    loaded = ait.load(_mlp(), path)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1 and len(frozen) == 1  # batch 1 only
    _assert_serves(loaded, reference, sizes=(1,))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    assert aitune_log.text.count(DEFERRED) == deferred_before

    _assert_serves(loaded, reference, sizes=(2, 5, 1))  # batch 2 compiles the dynamic build; 5 reuses it
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2 and len(frozen) == 2
    assert not torch._inductor.config.freezing  # the switch was on only while it traced
    assert aitune_log.text.count(DEFERRED) == deferred_before + 1
    assert "first call at input shapes ((2, 6),), which no stored sample has" in aitune_log.text
    assert RECOMPILE not in aitune_log.text


def test_threads_at_unseen_shapes_compile_the_deferred_dynamic_build_once(aitune_log, tmp_path):
    """Serving threads that meet shapes tuning never stored at the same time: one compiles the
    dynamic build, the others wait for it and then use it (one log line, one graph)."""
    import threading

    model = _mlp()
    reference = copy.deepcopy(model)
    m = ait.Module(model, "threads", strategy=_strategy(TorchInductorJitBackend()))
    ait.tune(m, _dataset(), batch_sizes=[1, 3], device="cpu")
    path = tmp_path / "threads.ait"
    ait.save(m, path)
    loaded = ait.load(_mlp(), path)
    torch._dynamo.utils.counters.clear()
    deferred_before = aitune_log.text.count(DEFERRED)
    inputs = [torch.randn(bs, 6) for bs in (2, 4, 5, 7)]
    outputs: dict[int, torch.Tensor] = {}
    start = threading.Barrier(len(inputs))

    def serve(i: int) -> None:
        start.wait()
        with torch.no_grad():
            outputs[i] = loaded(inputs[i])

    threads = [threading.Thread(target=serve, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert sorted(outputs) == list(range(len(inputs)))
    for i, x in enumerate(inputs):
        with torch.no_grad():
            torch.testing.assert_close(outputs[i], reference(x), atol=1e-5, rtol=1e-5)
    assert aitune_log.text.count(DEFERRED) == deferred_before + 1
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1  # the dynamic build, once
    assert RECOMPILE not in aitune_log.text
