"""A backend written by following docs/design.md#adding-a-backend (tests/helpers/plugin_trace/: one
folder, one `@register_backend` line) tunes, saves and loads like a built-in one."""

from __future__ import annotations

import json

import torch

import aitune.torch as ait
from aitune._native import _C
from aitune.torch.backend import registry
from aitune.torch.checkpoint.format import manifest_format_version
from aitune.torch.module.state import ModuleState

from plugin_trace import PluginTraceBackend


def _mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def test_the_plugin_is_registered_by_its_one_line():
    assert registry.lookup("plugin_trace") is PluginTraceBackend
    assert registry.name_of(PluginTraceBackend) == "plugin_trace"


def test_the_plugin_tunes_saves_and_loads_from_its_artefact(tmp_path):
    model = _mlp()
    x = torch.randn(3, 6)
    with torch.no_grad():
        expected = model(x)
    strategy = (
        ait.OneBackendStrategy(PluginTraceBackend())
        .enable_performance_validation(False)
        .enable_find_max_batch_size(False)
    )
    module = ait.Module(model, "plugin", strategy=strategy)
    ait.tune(module, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2, 4], device="cpu")
    assert module.state is ModuleState.TUNED
    assert isinstance(module.tuned_module.backends[0][1], PluginTraceBackend)

    path = ait.save(module, tmp_path / "plugin.ait")
    entry = json.loads(_C.ArchiveReader(str(path)).manifest())["modules"][0]["graphs"][0]["backend"]
    if manifest_format_version() >= 2:
        assert entry["name"] == "plugin_trace"
    else:
        assert entry["class"] == "plugin_trace.plugin_trace_backend.PluginTraceBackend"
    assert entry["requires"] == ["torch"] and list(entry["artifacts"]) == ["program"]

    loaded = ait.load(_mlp(seed=7), path)  # other weights: the traced program must serve
    backend = loaded.tuned_module.backends[0][1]
    assert isinstance(backend, PluginTraceBackend) and backend.restored and backend.is_active
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), expected)
