"""ait.Module as a transparent proxy: forwarding, interception, hooks, naming, registry and
states (docs/reference/api.md#top-level-names, docs/reference/recording.md#module-states)."""

from __future__ import annotations

import inspect

import pytest
import torch

import aitune.torch as ait
from aitune.torch import module_registry
from aitune.torch.module.state import ModuleState


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.some_attr = 42

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.linear(x) * scale


def _net() -> Net:
    torch.manual_seed(0)
    return Net().eval()


class _HookCounter:
    def __init__(self, module: torch.nn.Module) -> None:
        self.pre = 0
        self.post = 0
        module.register_forward_pre_hook(self._pre)
        module.register_forward_hook(self._post)

    def _pre(self, module, args):
        self.pre += 1

    def _post(self, module, args, output):
        self.post += 1


def test_is_an_nn_module_and_forwards_attributes():
    original = _net()
    m = ait.Module(original, "net")
    assert isinstance(m, torch.nn.Module)
    assert isinstance(m, Net)
    assert m.some_attr == 42
    assert m.linear is original.linear
    assert m.linear.weight is original.linear.weight
    assert m.module is original


def test_attribute_writes_reach_the_original():
    original = _net()
    m = ait.Module(original, "net")
    m.some_attr = 7
    assert original.some_attr == 7


def test_passthrough_state_dict_equals_original():
    original = _net()
    m = ait.Module(original, "net")
    with torch.no_grad():
        m(torch.randn(2, 4))
    m.enable_passthrough()
    assert m.state is ModuleState.PASSTHROUGH
    ours, theirs = m.state_dict(), original.state_dict()
    assert list(ours) == list(theirs) == ["linear.weight", "linear.bias"]
    for key in theirs:
        assert torch.equal(ours[key], theirs[key])
    assert m.to_dict().keys() == theirs.keys()


def test_calling_the_original_object_is_recorded():
    original = _net()
    m = ait.Module(original, "net")
    assert m.state is ModuleState.INIT
    x = torch.randn(2, 4)
    with torch.no_grad():
        out = original(x)
    assert m.state is ModuleState.RECORDING
    assert len(m.graph_specs) == 1
    assert m.graph_specs[0].num_calls == 1
    assert torch.equal(out, torch.nn.functional.linear(x, original.linear.weight, original.linear.bias))
    with torch.no_grad():
        original.forward(x)  # calling forward directly is intercepted as well
    assert m.graph_specs[0].num_calls == 2


def test_hooks_run_once_per_call_while_recording():
    original = _net()
    counter = _HookCounter(original)
    m = ait.Module(original, "net")
    with torch.no_grad():
        m(torch.randn(2, 4))
        original(torch.randn(2, 4))
    assert (counter.pre, counter.post) == (2, 2)
    assert m.graph_specs[0].num_calls == 2


def test_hooks_run_once_per_call_when_tuned(cpu_eager_strategy):
    original = _net()
    counter = _HookCounter(original)
    m = ait.Module(original, "net", strategy=cpu_eager_strategy)
    ait.tune(m, [torch.randn(4) for _ in range(2)], device="cpu")
    assert m.state is ModuleState.TUNED
    counter.pre = counter.post = 0
    with torch.no_grad():
        m(torch.randn(3, 4))
        original(torch.randn(1, 4))
    assert (counter.pre, counter.post) == (2, 2)


def test_hooks_added_after_tuning_and_global_hooks_still_run(cpu_eager_strategy):
    """The proxy's fast path to the dispatcher is taken only without hooks
    (docs/reference/dispatch.md#per-call-pipeline: the user's hooks run in Python first)."""
    original = _net()
    m = ait.Module(original, "net", strategy=cpu_eager_strategy)
    ait.tune(m, [torch.randn(4) for _ in range(2)], device="cpu")
    x = torch.randn(3, 4)
    with torch.no_grad():
        expected = original._aitune_original_forward(x)
        assert torch.equal(m(x), expected)  # fast path
        counter = _HookCounter(original)
        m(x)
        assert (counter.pre, counter.post) == (1, 1)
        seen = []
        handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, a, out: seen.append(type(mod)))
        try:
            m(x)
        finally:
            handle.remove()
        assert Net in seen and (counter.pre, counter.post) == (2, 2)


def test_hooks_run_once_per_call_in_passthrough():
    original = _net()
    counter = _HookCounter(original)
    m = ait.Module(original, "net")
    m.enable_passthrough()
    with torch.no_grad():
        m(torch.randn(2, 4))
    assert (counter.pre, counter.post) == (1, 1)


def test_forward_signature_is_kept():
    original = _net()
    m = ait.Module(original, "net")
    expected = ["x", "scale"]
    assert list(inspect.signature(original.forward).parameters) == expected
    assert list(inspect.signature(m.forward).parameters) == expected
    assert inspect.signature(original.forward).parameters["scale"].default == 1.0


def test_default_name_and_slash_replacement():
    original = _net()
    m = ait.Module(original)
    assert m.name == f"{Net.__module__}.{Net.__qualname__}"
    assert list(module_registry.MODULE_REGISTRY) == [m.name]
    other = ait.Module(torch.nn.Linear(2, 2), name="pipe/unet/block")
    assert other.name == "pipe_unet_block"
    assert list(module_registry.MODULE_REGISTRY) == [m.name, "pipe_unet_block"]


def test_registering_a_name_twice_replaces_the_entry(aitune_log):
    first = ait.Module(_net(), "same")
    second = ait.Module(_net(), "same")
    assert list(module_registry.MODULE_REGISTRY) == ["same"]
    assert module_registry.MODULE_REGISTRY["same"] is second
    assert module_registry.MODULE_REGISTRY["same"] is not first
    assert any(r.levelname == "WARNING" and "same" in r.getMessage() for r in aitune_log.records)


@pytest.mark.parametrize("method", ["to_dict", "state_dict"])
def test_state_dict_before_tuning_raises(method):
    m = ait.Module(_net(), "net")
    with pytest.raises(RuntimeError) as info:
        getattr(m, method)()
    assert str(info.value) == "Module is not tuned. Cannot save state_dict."
    with torch.no_grad():
        m(torch.randn(1, 4))
    assert m.state is ModuleState.RECORDING
    with pytest.raises(RuntimeError) as info:
        getattr(m, method)()
    assert str(info.value) == "Module is not tuned. Cannot save state_dict."


def test_strategy_and_strategies_are_exclusive(cpu_eager_strategy):
    with pytest.raises(ValueError) as info:
        ait.Module(_net(), "net", strategy=cpu_eager_strategy, strategies=[cpu_eager_strategy])
    assert str(info.value) == "Only one of strategy or strategies should be provided"
    assert "net" not in module_registry.MODULE_REGISTRY


def test_passthrough_then_recording_keeps_recordings():
    m = ait.Module(_net(), "net")
    with torch.no_grad():
        m(torch.randn(1, 4))
        m(torch.randn(1, 4, 4))
    assert len(m.graph_specs) == 2
    m.enable_passthrough()
    with torch.no_grad():
        m(torch.randn(2, 4))  # not recorded
    assert [g.num_calls for g in m.graph_specs] == [1, 1]
    m.enable_recording()
    assert m.state is ModuleState.RECORDING
    assert [g.name for g in m.graph_specs] == ["0", "1"]
    with torch.no_grad():
        m(torch.randn(2, 4))
    assert [g.num_calls for g in m.graph_specs] == [2, 1]


def test_passthrough_runs_the_original():
    original = _net()
    m = ait.Module(original, "net")
    m.enable_passthrough()
    x = torch.randn(3, 4)
    with torch.no_grad():
        assert torch.equal(m(x, scale=2.0), original.linear(x) * 2.0)
    assert m.graph_specs == []


def test_activate_without_tuning_raises():
    m = ait.Module(_net(), "net")
    with torch.no_grad():
        m(torch.randn(1, 4))
    with pytest.raises(RuntimeError) as info:
        m.activate()
    assert str(info.value) == "Module is not tuned. Cannot activate backends."


def test_tuned_module_needs_force_to_reset(cpu_eager_strategy):
    original = _net()
    m = ait.Module(original, "net", strategy=cpu_eager_strategy)
    ait.tune(m, [torch.randn(4)], device="cpu")
    assert m.state is ModuleState.TUNED
    with pytest.raises(RuntimeError):
        m.enable_passthrough()
    assert m.state is ModuleState.TUNED
    m.enable_passthrough(force=True)
    assert m.state is ModuleState.PASSTHROUGH
    x = torch.randn(2, 4)
    with torch.no_grad():
        assert torch.equal(m(x), original.linear(x))


def test_rewrapping_keeps_the_original_forward():
    original = _net()
    first = ait.Module(original, "a")
    second = ait.Module(first, "b")
    assert second.module is original
    x = torch.randn(2, 4)
    with torch.no_grad():
        out = original(x)
    assert torch.equal(out, original.linear(x))
    assert [g.num_calls for g in second.graph_specs] == [1]
