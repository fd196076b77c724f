"""JIT state machine in-process (docs/reference/jit.md), with the fake backend so nothing compiles: heads and
children, triggers, deferred tuning, hierarchy fallback, exclusions, disable, deep copies."""

from __future__ import annotations

import copy
import importlib
import inspect
import sys

import pytest
import torch
from jit_helpers import Net, fake_strategy, reset_jit

import aitune.torch as ait
import aitune.torch.jit.tune  # noqa: F401 (makes `ait.jit.tune` an attribute)
from aitune.exceptions import DiskSpaceError
from aitune.torch.jit import exit_report, patcher
from aitune.torch.jit.config import JITMode
from aitune.torch.jit.config import config as jit_config
from aitune.torch.jit.patched_module import get_patched
from aitune.torch.jit.state import JITModuleState, runtime


@pytest.fixture(autouse=True)
def _jit(tmp_path):
    reset_jit()
    jit_config.cache_dir = tmp_path / "jit"
    jit_config.device = "cpu"
    jit_config.strategy = fake_strategy()
    yield
    reset_jit()


def _build(cls=Net, *args):
    with ait.jit.patcher.prepare_for_jit_tuning():
        return cls(*args).eval()


def test_head_is_tuned_after_first_call_and_children_detach():
    net = _build()
    head = get_patched(net)
    assert head.state is JITModuleState.INIT and get_patched(net.a) is not None
    x = torch.randn(2, 4)
    with torch.no_grad():
        out = net(x)
        eager = net.compute(x)  # the children are plain again once the head is tuned
    torch.testing.assert_close(out, eager)
    assert [h.name for h in runtime.heads] == ["Net"]
    assert head.state is JITModuleState.TUNED and head.name == "Net"
    assert head.tuned.backends[0][1].name == "SelectiveFakeBackend"
    assert get_patched(net.a) is None and "forward" not in net.a.__dict__  # detached: plain class forward
    backend = head.tuned.backends[0][1]
    with torch.no_grad():
        net(x)
        net(torch.randn(3, 4))
    assert backend.calls >= 2  # later calls go through the backend
    assert head.device == torch.device("cpu")
    assert not patcher.is_patching()  # the scoped patch ended with the block


def test_router_keeps_signature_and_deepcopy_gets_a_fresh_state():
    net = _build()
    assert list(inspect.signature(net.forward).parameters) == ["x", "scale"]
    clone = copy.deepcopy(net)
    with torch.no_grad():
        net(torch.randn(1, 4))
    assert get_patched(net).state is JITModuleState.TUNED
    twin = get_patched(clone)
    assert twin is not get_patched(net) and twin.module is clone and twin.state is JITModuleState.INIT
    with torch.no_grad():
        torch.testing.assert_close(clone(torch.ones(1, 4)), clone.compute(torch.ones(1, 4)))


def test_min_samples_with_batch_axis_required_waits_for_a_dynamic_axis():
    jit_config.min_samples = 2
    net = _build()
    head = get_patched(net)
    with torch.no_grad():
        for _ in range(3):
            net(torch.randn(2, 4))
    assert head.state is JITModuleState.RECORDING and head.num_calls == 3
    lines = exit_report.diagnostics()
    assert any("no dynamic axis was detected" in line and "two different batch sizes" in line for line in lines)
    with torch.no_grad():
        net(torch.randn(5, 4))  # a second batch size: axis 0 becomes dynamic
    assert head.state is JITModuleState.TUNED
    spec = head.graph_specs[0].input_spec.tensors[0].spec
    assert spec.min_shape == [2, 4] and spec.max_shape == [5, 4]
    # the batch size is unknown in JIT mode, so a dim axis (docs/reference/recording.md#dynamic-axes)
    assert spec.shape == ["dim0", 4]
    assert not head.graph_specs[0].has_batch_axis()


def test_min_samples_without_batch_axis_tunes_after_n_calls():
    jit_config.min_samples = 3
    jit_config.batch_axis_required = False
    net = _build()
    with torch.no_grad():
        net(torch.randn(2, 4))
        net(torch.randn(2, 4))
        assert get_patched(net).state is JITModuleState.RECORDING
        net(torch.randn(2, 4))
    assert get_patched(net).state is JITModuleState.TUNED


def test_deferred_tunes_on_the_next_forward_and_rejects_other_modes():
    with pytest.raises(
        RuntimeError, match="^tune.deferred\\(\\) requires JITMode.TUNE_DEFERRED, but current mode is tune_eager$"
    ):
        ait.jit.tune.deferred()
    jit_config.mode = JITMode.TUNE_DEFERRED
    net = _build()
    head = get_patched(net)
    with torch.no_grad():
        for batch in (1, 2, 3):
            net(torch.randn(batch, 4))
    assert head.state is JITModuleState.RECORDING
    ait.jit.tune.deferred()
    assert head.state is JITModuleState.RECORDING  # nothing happens until the next forward
    with torch.no_grad():
        out = net(torch.ones(2, 4))
    assert head.state is JITModuleState.TUNED
    # That forward was served by the backend, not recorded nor run eagerly.
    assert head.num_calls == 3 and head.graph_specs[0].num_calls == 3
    torch.testing.assert_close(out, net.compute(torch.ones(2, 4)))


def test_failed_head_falls_back_to_children_within_max_depth():
    jit_config.max_depth_level = 2
    jit_config.strategy = fake_strategy(fail_for=("Net",))
    net = _build()
    with torch.no_grad():
        net(torch.randn(2, 4))
    head, a, b = get_patched(net), get_patched(net.a), get_patched(net.b)
    assert head.state is JITModuleState.EAGER and "fake build failure for Net" in head.reason
    assert [c.name for c in head.children] == ["Net.a", "Net.b"]
    assert a.state is JITModuleState.TUNED and b.state is JITModuleState.TUNED
    assert get_patched(net.a.lin) is None  # parameterless ReLU and depth-2 Linear were unpatched
    with torch.no_grad():
        torch.testing.assert_close(net(torch.ones(1, 4)), net.compute(torch.ones(1, 4)))
    assert a.tuned.backends[0][1].calls >= 1
    text = ait.PatchedModule.hierarchy_text()
    assert text.splitlines()[0].startswith("Net [Net] EAGER") and "  Net.a [Block] TUNED" in text


def test_failed_head_without_children_stays_eager_and_is_explained():
    jit_config.strategy = fake_strategy(fail_for=("Net",))
    net = _build()
    with torch.no_grad():
        net(torch.randn(2, 4))
    head = get_patched(net)
    assert head.state is JITModuleState.EAGER and not head.children
    assert get_patched(net.a) is None  # max_depth_level=1: heads only
    lines = exit_report.diagnostics()
    assert lines[0].startswith("JIT tuning tuned no module")
    assert any("raise jit_config.max_depth_level" in line for line in lines)


def test_disk_space_error_propagates_and_children_are_restored(monkeypatch):
    from aitune.torch.jit import jit_tuning

    def full_disk(patched):
        raise DiskSpaceError("No space left on AITune cache device; path=/x; free=0")

    monkeypatch.setattr(jit_tuning, "_tune_graphs", full_disk)
    jit_config.max_depth_level = 2
    net = _build()
    with pytest.raises(DiskSpaceError), torch.no_grad():
        net(torch.randn(2, 4))
    assert get_patched(net.a).is_routed  # suspended routers were put back


def test_exclusions_min_parameters_skip_modules_and_patch_exclude():
    jit_config.patch_exclude = ("Block",)
    with patcher.prepare_for_jit_tuning():
        seq = torch.nn.Sequential(torch.nn.Linear(4, 4))
        net = Net()
        relu = torch.nn.ReLU()
    assert get_patched(seq) is None and get_patched(net.a) is None  # built-in and user exclusions
    assert get_patched(seq[0]) is not None and get_patched(net) is not None
    with torch.no_grad():
        relu(torch.randn(2))
    assert get_patched(relu) is None  # 0 parameters <= min_parameters=0: unpatched at its first call

    reset_jit()
    jit_config.device, jit_config.strategy = "cpu", fake_strategy()
    jit_config.skip_modules = ["Net"]
    jit_config.max_depth_level = 1
    net = _build()
    with torch.no_grad():
        net(torch.randn(2, 4))
    assert get_patched(net).state is JITModuleState.SKIPPED
    # A skipped module is transparent: its blocks are judged as heads of their own.
    assert get_patched(net.a).state is JITModuleState.TUNED and get_patched(net.a).parent is None
    assert [h.name for h in runtime.heads] == ["Net", "Block", "Block.1"]
    assert any(
        line.startswith("module `Net` skipped: class Net is in jit_config.skip_modules")
        for line in exit_report.diagnostics()
    )


def _import_fresh(name: str) -> None:
    # A side-effect module runs once per process: reload it when an earlier test imported it.
    module = sys.modules.get(name)
    importlib.reload(module) if module is not None else importlib.import_module(name)


def test_enable_and_disable_patch_and_unpatch():
    _import_fresh("aitune.torch.jit.enable")
    assert torch.nn.Module.__init__ is not patcher._patcher.original_init and patcher.is_patching()
    tuned_net, plain_net = Net().eval(), Net().eval()
    with torch.no_grad():
        tuned_net(torch.randn(1, 4))
    assert get_patched(tuned_net).state is JITModuleState.TUNED
    _import_fresh("aitune.torch.jit.disable")
    assert not patcher.is_patching()
    assert get_patched(plain_net) is None and "forward" not in plain_net.__dict__
    assert get_patched(tuned_net).state is JITModuleState.TUNED  # keeps serving
    assert get_patched(Net()) is None  # constructed after disable: plain


def test_no_modules_found_is_explained():
    assert "found no modules" in exit_report.diagnostics()[0]


def test_dry_run_builds_nothing(tmp_path):
    jit_config.dry_run = True
    jit_config.dry_run_failure_probability = 0.0
    net = _build()
    with torch.no_grad():
        net(torch.randn(2, 4))
    head = get_patched(net)
    assert head.state is JITModuleState.TUNED and head.tuned is None and "(dry run)" in head.describe()
    assert not (tmp_path / "jit").exists()


def test_history_and_config_validation(capsys):
    net = _build()
    with torch.no_grad():
        net(torch.randn(2, 4))
    ait.PatchedModule.print_history()
    out = capsys.readouterr().out
    assert "Net: head at level 0" in out and "Net: tuning started" in out and "Net: tuned:" in out
    jit_config.min_samples = 0
    with pytest.raises(ValueError, match="jit_config.min_samples must be an integer >= 1, got 0"):
        jit_config.validate()


class _Breaking(Net):
    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        y = self.a(x)
        torch._dynamo.graph_break()
        return self.b(y) * scale


def test_detect_graph_breaks_sends_tuning_to_the_children():
    jit_config.detect_graph_breaks = True
    jit_config.max_depth_level = 2
    net = _build(_Breaking)
    with torch.no_grad():
        out = net(torch.randn(2, 4))
    head = get_patched(net)
    assert head.state is JITModuleState.EAGER and head.reason.startswith("GraphBreakException: graph break detected")
    assert get_patched(net.a).state is JITModuleState.TUNED and get_patched(net.b).state is JITModuleState.TUNED
    assert out.shape == (2, 4)


def test_pickled_and_traced_patched_modules_stay_plain(tmp_path):
    net = _build()
    torch.save(net, tmp_path / "net.pt")
    loaded = torch.load(tmp_path / "net.pt", weights_only=False)
    assert get_patched(loaded) is None and get_patched(loaded.a) is None
    with torch.no_grad():
        expected = loaded(torch.ones(1, 4))
    assert not runtime.heads  # the loaded copy is plain
    traced = torch.fx.symbolic_trace(net)  # a trace is not a call: nothing recorded
    assert get_patched(net).state is JITModuleState.INIT and not runtime.heads
    with torch.no_grad():
        torch.testing.assert_close(traced(torch.ones(1, 4)), expected)


def test_a_backend_not_faster_than_eager_leaves_the_module_eager():
    from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig
    from jit_helpers import SelectiveFakeBackend, SelectiveFakeConfig

    profiling = ProfilingConfig(batch_sizes=[1], measurement_stop_strategy=NumStepsMeasuringStopStrategy(3, 1))
    slow = SelectiveFakeBackend(SelectiveFakeConfig(delay_s=0.02))
    jit_config.strategy = ait.FirstWinsStrategy([slow], profiling_config=profiling)  # the gate is on
    net = _build()
    with torch.no_grad():
        net(torch.randn(2, 4))
    head = get_patched(net)
    assert head.state is JITModuleState.EAGER
    assert "There is no valid backend for a module: Net" in head.reason
    assert "SelectiveFakeBackend(delay_s=0.02): not faster than eager" in head.reason


def test_a_stored_no_backend_outcome_spares_the_next_process_the_builds(monkeypatch):
    """JIT reuse also covers "nothing beat eager": the next process with the same model, config
    and environment goes EAGER from the store without building the candidates again."""
    from aitune.torch.config import config
    from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig
    from jit_helpers import SelectiveFakeBackend, SelectiveFakeConfig

    monkeypatch.setattr(config, "reuse_tuning_results", True)
    builds = []
    original_build = SelectiveFakeBackend._build
    monkeypatch.setattr(SelectiveFakeBackend, "_build", lambda self, *a: (builds.append(1), original_build(self, *a)))
    profiling = ProfilingConfig(batch_sizes=[1], measurement_stop_strategy=NumStepsMeasuringStopStrategy(3, 1))

    cache_dir = jit_config.cache_dir

    def run_once() -> object:  # as a fresh process: no heads registered, default jit_config
        reset_jit()
        jit_config.cache_dir, jit_config.device = cache_dir, "cpu"
        jit_config.strategy = ait.FirstWinsStrategy(
            [SelectiveFakeBackend(SelectiveFakeConfig(delay_s=0.02))], profiling_config=profiling
        )
        torch.manual_seed(0)  # the same weights: the same model fingerprint
        net = _build()
        with torch.no_grad():
            net(torch.ones(2, 4))
        return get_patched(net)

    first = run_once()
    assert first.state is JITModuleState.EAGER and len(builds) == 1
    stored = list((cache_dir / "results").rglob("*.no_backend.json"))
    assert len(stored) == 1
    second = run_once()
    assert second.state is JITModuleState.EAGER
    assert len(builds) == 1, "the stored outcome must spare the build"
    assert "not faster than eager" in second.reason and "stored outcome" in second.reason
    stored[0].unlink()
    third = run_once()
    assert third.state is JITModuleState.EAGER and len(builds) == 2
