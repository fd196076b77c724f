"""The tuned state shared by ait.Module and the JIT PatchedModule (module/tuned_state.py,
docs/design.md#one-tuned-call): serving, the weights move after tuning, activate/deactivate/reset,
and the public Module.restore / Module.recorder that ait.load and ait.save use."""

from __future__ import annotations

import pytest
import torch

import aitune.torch as ait
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState
from aitune.torch.module.tuned_state import TunedState, install_router, remove_router


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def _tuned(strategy, name: str) -> ait.Module:
    torch.manual_seed(0)
    m = ait.Module(Net().eval(), name)
    with torch.no_grad():
        m(torch.randn(2, 4))
    m.tune(strategy=strategy)
    return m


def test_recorder_is_the_recording_state():
    m = ait.Module(Net().eval(), "tuned_state_recorder")
    with torch.no_grad():
        m(torch.randn(2, 4))
    assert m.recorder.graphs == m.graph_specs and len(m.recorder.graphs) == 1


def test_restore_serves_the_given_graphs_and_backends(cpu_eager_strategy):
    source = _tuned(cpu_eager_strategy, "tuned_state_source")
    served = list(source.tuned_module.backends)
    graphs = [g for g, _ in served]
    torch.manual_seed(0)
    target = ait.Module(Net().eval(), "tuned_state_target")
    assert target.state is ModuleState.INIT
    target.restore(graphs, served, strict=False)
    assert target.state is ModuleState.TUNED
    assert target.tuned_module.backends == served and target.recorder.graphs == graphs
    torch.manual_seed(0)
    reference = Net().eval()  # the same weights
    x = torch.randn(2, 4)
    with torch.no_grad():
        assert torch.equal(target(x), reference(x))
    # the restored graphs are found by key, as recorded ones are (Recorder.replace_graphs)
    key, leaves = target.recorder.flatten((x,), {})
    assert target.recorder.find_graph(key, leaves) is graphs[0]


def test_deactivate_keeps_the_selection_and_activate_serves_it_again(cpu_eager_strategy):
    m = _tuned(cpu_eager_strategy, "tuned_state_cycle")
    core = m._self_core
    tuned = core.tuned
    first = core.dispatch
    assert first is tuned.dispatcher
    m.deactivate()
    assert core.dispatch is None and core.tuned is tuned
    with pytest.raises(RuntimeError, match="deactivated"):
        m(torch.randn(2, 4))
    m.activate()
    assert core.dispatch is tuned.dispatcher and core.dispatch is not first  # rebuilt over the new runners
    m.enable_passthrough(force=True)
    assert core.tuned is None and core.dispatch is None


def test_serve_moves_the_weights_only_when_no_backend_needs_them(cpu_eager_strategy, monkeypatch):
    source = _tuned(cpu_eager_strategy, "tuned_state_move")
    served = list(source.tuned_module.backends)
    moves = []

    class Recording(Net):
        def to(self, *args, **kwargs):
            moves.append(args)
            return self

    module = Recording()
    core = TunedState(module, module.forward)
    core.serve("tuned_state_move", source.recorder, served, "eager", strict=False)
    core.serve("tuned_state_move", source.recorder, served, "raise", strict=False)
    assert moves == []  # the eager backend is a JIT backend: it serves the module's own weights
    backend = served[0][1]
    monkeypatch.setattr(type(backend), "is_jit", property(lambda self: False))
    core.serve("tuned_state_move", source.recorder, served, "eager", strict=False)
    assert moves == []  # a graph may fall back to the original forward: it keeps its weights
    core.serve("tuned_state_move", source.recorder, served, "raise", strict=False)
    assert moves == [(config.device_after_tuning,)]


def test_router_install_and_removal():
    module = Net()
    original = module.forward

    def router(*args, **kwargs):
        return "routed"

    install_router(module, original, router)
    assert module(torch.randn(1, 4)) == "routed" and module._aitune_original_forward == original
    remove_router(module)
    assert "forward" not in module.__dict__ and "_aitune_original_forward" not in module.__dict__
    assert module(torch.randn(1, 4)).shape == (1, 3)
