"""JIT names AITune's users call: PRINT_HIERARCHY_HEADER and print_hierarchy(sink=...),
PatchedModule.heads, try_tune(), aitune.torch.jit.patcher.Patcher and
aitune.torch.tune_data.reporting.snapshot_tuning_data."""

import json

import torch

import aitune.torch as ait
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.jit.config import JITMode
from aitune.torch.jit.patched_module import PRINT_HIERARCHY_HEADER, PatchedModule, get_patched
from aitune.torch.jit.patcher import Patcher, patch_for_jit_tuning
from aitune.torch.jit.state import JITModuleState
from aitune.torch.tune_data.reporting import snapshot_tuning_data


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = Block()
        self.b = Block()

    def forward(self, x):
        return self.b(self.a(x))


def _eager_strategy():
    return ait.FirstWinsStrategy([TorchEagerBackend()]).enable_performance_validation(False)


def test_print_hierarchy_to_a_sink_and_heads(jit_clean):
    jit_clean.strategy = _eager_strategy()
    lines: list[str] = []
    PatchedModule.print_hierarchy(sink=lines.append)
    assert lines == ["No modules in hierarchy"]

    @patch_for_jit_tuning
    def build():
        return Net().eval()

    net = build()
    with torch.no_grad():
        net(torch.randn(2, 4))
    assert [h.name for h in PatchedModule.heads] == ["Net"]
    assert PatchedModule.heads[0] is get_patched(net)
    lines.clear()
    PatchedModule.print_hierarchy(sink=lines.append)
    assert lines[0] == PRINT_HIERARCHY_HEADER == "JIT Tuning Hierarchy:"
    assert lines[1] == "├─ Net level=0🪜 state=tuned🎯 (TorchEagerBackend) call_count=1"


def test_try_tune_waits_for_the_trigger(jit_clean):
    jit_clean.strategy = _eager_strategy()
    jit_clean.mode = JITMode.TUNE_DEFERRED
    Patcher.patch_torch()
    net = Net().eval()
    with torch.no_grad():
        net(torch.randn(2, 4))
    head = PatchedModule.heads[0]
    head.try_tune()
    assert head.state is JITModuleState.RECORDING  # deferred: nothing until enable_tune_deferred()
    Patcher.enable_tune_deferred()
    head.try_tune()
    assert head.state is JITModuleState.TUNED
    with torch.no_grad():
        torch.testing.assert_close(net(torch.ones(3, 4)), net.b(net.a(torch.ones(3, 4))))


def test_patcher_class(jit_clean):
    Patcher.patch_torch()
    net = Net()
    assert "test_compat_jit.Net" in Patcher.intercepted_classes()
    assert [p.module for p in Patcher.patched_modules_under(net)] == [net, net.a, net.a.lin, net.b, net.b.lin]
    assert Patcher._is_allowed_to_tune(net) and not Patcher._is_allowed_to_tune(torch.nn.Sequential())
    Patcher.unpatch_torch()
    assert get_patched(Net()) is None  # no longer patching new modules
    assert get_patched(net) is not None  # and the existing ones keep their patch
    Patcher.patch_torch()
    Patcher.unpatch_torch(unpatch_modules=True)
    assert get_patched(net) is None


def test_snapshot_tuning_data_at_aitunes_path(tmp_path, cpu_eager_strategy):
    module = ait.Module(torch.nn.Linear(4, 2).eval(), "snap", strategy=cpu_eager_strategy)
    ait.tune(module, [torch.randn(4)], batch_sizes=[1, 2], device="cpu")
    path = snapshot_tuning_data(tmp_path / "report.json")
    report = json.loads(path.read_text())
    assert report["modules"][0]["name"] == "snap"  # aitune's telemetry schema (docs/guide.md)
