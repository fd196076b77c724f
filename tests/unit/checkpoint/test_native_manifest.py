"""manifest.json has one reader, the C++ core's `read_manifest`, used by the C++ runtime and, through
`_C`, by ait.load and the results store (docs/design.md#the-checkpoint). The typed manifest Python
gets holds every field the Python writer wrote, and the two languages agree on the rules their
readers once applied apart: `use_cuda_graphs` and the format-1 backend names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save as save_safetensors

import aitune.torch as ait
from aitune import exceptions as errors
from aitune._native import _C
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.checkpoint.format import OpenedCheckpoint, backend_name, resolve_backend
from aitune.torch.checkpoint.graphs import graph_from_native, graph_to_json
from aitune.torch.checkpoint.restore import config_of
from aitune.torch.checkpoint.storage import LocalTorchStorage
from aitune.torch.config import config

from checkpoint_tools import read_archive, rewrite


class KwargsNet(torch.nn.Module):
    """Keyword inputs, a constant and a nested output: leaves of every kind."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(6, 3)

    def forward(self, x, scale: float = 1.0, extra=None):
        y = self.linear(x) * scale + extra["bias"]
        return {"y": y, "pair": (y, y.sum(-1))}


class Pipeline:
    """A pipeline object holding a tuned module (its prefix: "encoder")."""


def _strategy() -> ait.OneBackendStrategy:
    backend = TorchEagerBackend()
    return ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)


@pytest.fixture
def saved(tmp_path) -> Path:
    torch.manual_seed(0)
    pipe = Pipeline()
    pipe.encoder = ait.Module(KwargsNet().eval(), "kw", strategy=_strategy())
    ait.tune(
        lambda x: pipe.encoder(x, scale=2.0, extra={"bias": torch.ones(3)}),
        [torch.randn(6) for _ in range(2)],
        batch_sizes=[1, 2],
        device="cpu",
    )
    return ait.save(pipe, tmp_path / "pipe.ait", LocalTorchStorage(sha_type="512"), include_weights=True)


def _fingerprint_as_compared(saved: dict) -> dict:
    """The saved fingerprint as the one comparison takes it (cpp/core/checkpoint/fingerprint.h):
    text values, a number as its JSON text."""
    return {k: v if v is None or isinstance(v, str) else json.dumps(v) for k, v in saved.items()}


def _assert_backend_holds_what_was_written(entry: _C.ManifestBackend, written: dict) -> None:
    """Every key the writer stored reads back under its own name, but two: a format-1 file's
    "class" (read as class_path, and mapped to a name) and "runtime" (the writer's copy of the
    config's use_cuda_graphs switch, which decides: manifest.h)."""
    for key, value in written.items():
        if key == "class":
            assert entry.class_path == value and entry.name == _C.LEGACY_BACKEND_NAMES.get(value, f"custom:{value}")
        elif key == "runtime":
            assert entry.use_cuda_graphs is bool(written["config"].get("use_cuda_graphs"))
        else:
            assert key in _C.MANIFEST_BACKEND_FIELDS and getattr(entry, key) == value, key


def _assert_holds_what_was_written(manifest: _C.Manifest, raw: dict) -> None:
    assert manifest.format_version == raw["format_version"]
    assert (manifest.kind, manifest.results_key) == (raw.get("kind"), raw.get("results_key"))
    assert manifest.created_at == raw["created_at"]
    assert manifest.fingerprint == _fingerprint_as_compared(raw["fingerprint"])
    root = raw["root"]
    assert (manifest.root.kind, manifest.root.class_name, manifest.root.weights) == (
        root["kind"],
        root["class"],
        root["weights"],
    )
    assert [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in manifest.files] == raw["files"]
    assert manifest.sha512 == (raw.get("sha512") or {})
    assert len(manifest.modules) == len(raw["modules"])
    for module, written in zip(manifest.modules, raw["modules"]):
        assert {
            "name": module.name,
            "prefix": module.prefix,
            "class": module.class_name,
            "strict_mode": module.strict_mode,
            "fallback_policy": module.fallback_policy,
            "weights": module.weights,
            "forward_signature": [
                {"name": p.name, "kind": p.kind, "has_default": p.has_default} for p in module.forward_signature
            ],
            "dynamic_shapes": module.dynamic_shapes,
        } == {k: v for k, v in written.items() if k != "graphs"}
        assert len(module.graphs) == len(written["graphs"])
        for graph, written_graph in zip(module.graphs, written["graphs"]):
            assert graph.name == written_graph["name"] and graph.samples == written_graph["samples"]
            spec = graph_to_json(graph_from_native(graph, [], None))
            assert spec == {k: written_graph[k] for k in spec}
            _assert_backend_holds_what_was_written(graph.backend, written_graph["backend"])


def test_the_typed_manifest_holds_every_field_ait_save_wrote(saved):
    raw, _ = read_archive(saved)
    manifest = OpenedCheckpoint(saved, "fast").manifest
    _assert_holds_what_was_written(manifest, raw)
    # What the fixture was made to cover: a prefix, module weights, SHA-512 digests, constants.
    assert manifest.modules[0].prefix == "encoder" and manifest.modules[0].weights and manifest.sha512
    leaves = manifest.modules[0].graphs[0].inputs
    assert any(not leaf.is_tensor for leaf in leaves)
    assert any(isinstance(leaf.semantic_path, tuple) for leaf in leaves)


def test_root_weights_read_as_written(saved, tmp_path):
    # ait.save writes them for an nn.Module root around tuned submodules (weights outside them).
    weights = {"entry": "weights/root.safetensors", "aliases": {"tied": "head.weight"}, "extra_state": {}}

    def edit(m):
        m["root"].update(kind="module", weights=weights)

    tensors = save_safetensors({"head.weight": torch.ones(2, 3)})
    path = rewrite(saved, tmp_path / "root.ait", edit, extra={"weights/root.safetensors": tensors})
    raw, _ = read_archive(path)
    manifest = OpenedCheckpoint(path, "fast").manifest
    _assert_holds_what_was_written(manifest, raw)
    assert manifest.root.weights == weights and manifest.root.kind == "module"


def test_the_typed_manifest_holds_every_field_the_results_store_wrote(tmp_path):
    config.reuse_tuning_results = True
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 3)).eval()
    ait.tune(ait.Module(model, "mlp", strategy=_strategy()), [torch.randn(6)], batch_sizes=[1], device="cpu")
    [stored] = sorted((Path(config.cache_dir) / "results" / "mlp").glob("*.ait"))
    raw, _ = read_archive(stored)
    manifest = OpenedCheckpoint(stored, "fast").manifest
    _assert_holds_what_was_written(manifest, raw)
    assert manifest.kind == "aitune.results" and manifest.results_key == stored.stem


def test_a_hostile_value_in_a_field_python_reads_is_a_typed_error(saved, tmp_path):
    def edit(m):
        m["modules"][0]["graphs"][0]["backend"]["own_state"] = "yes"

    with pytest.raises(errors.CorruptCheckpointError, match="backend.own_state must be true or false"):
        OpenedCheckpoint(rewrite(saved, tmp_path / "bad.ait", edit), "fast")
    with pytest.raises(errors.CorruptCheckpointError, match=r"^manifest.json is corrupt: it is not valid JSON"):
        _C.read_manifest("{")


# -- one rule for use_cuda_graphs ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("in_config", "in_runtime"),
    [(True, True), (False, False), (True, False), (False, True), (None, True)],
)
def test_use_cuda_graphs_is_the_configs_switch_for_python_and_cpp(saved, in_config, in_runtime):
    """The writer stores the switch twice (config.use_cuda_graphs, runtime.use_cuda_graphs); the
    config's decides, in the C++ reader (and so the C++ runtime) and in the backend Python restores."""
    raw, _ = read_archive(saved)
    backend = raw["modules"][0]["graphs"][0]["backend"]
    if in_config is None:
        backend["config"].pop("use_cuda_graphs")
    else:
        backend["config"]["use_cuda_graphs"] = in_config
    backend["runtime"] = {"use_cuda_graphs": in_runtime}
    native = _C.read_manifest(json.dumps(raw)).modules[0].graphs[0].backend
    restored = config_of(resolve_backend(native), native)
    assert native.use_cuda_graphs is bool(in_config) is restored.use_cuda_graphs


# -- one table of format-1 backend names ------------------------------------------------------------
@pytest.mark.parametrize("class_path", sorted(_C.LEGACY_BACKEND_NAMES))
def test_cpp_and_python_give_a_format1_class_path_the_tables_name(saved, class_path):
    raw, _ = read_archive(saved)
    raw["format_version"] = 1
    backend = raw["modules"][0]["graphs"][0]["backend"]
    backend["class"] = class_path
    del backend["name"]
    native = _C.read_manifest(json.dumps(raw)).modules[0].graphs[0].backend
    assert native.name == backend_name(native) == _C.LEGACY_BACKEND_NAMES[class_path]
    assert native.class_path == class_path


def test_a_format1_class_path_outside_the_table_is_custom_in_both(saved):
    raw, _ = read_archive(saved)
    raw["format_version"] = 1
    backend = raw["modules"][0]["graphs"][0]["backend"]
    backend["class"] = "my_pkg.backends.MyBackend"
    del backend["name"]
    native = _C.read_manifest(json.dumps(raw)).modules[0].graphs[0].backend
    assert native.name == backend_name(native) == "custom:my_pkg.backends.MyBackend"


# -- the graph a tuning process sends a worker -------------------------------------------------------
def test_a_graph_spec_alone_reads_as_the_manifests_graph(saved):
    graph = OpenedCheckpoint(saved, "fast").manifest.modules[0].graphs[0]
    written = graph_to_json(graph_from_native(graph, [], None))
    alone = _C.read_graph_spec(json.dumps(written))
    assert graph_to_json(graph_from_native(alone, [], None)) == written
    with pytest.raises(errors.CorruptCheckpointError, match="graph spec is corrupt: graph.key_tokens"):
        _C.read_graph_spec(json.dumps(dict(written, key_tokens=[-1])))
