"""Save and load (docs/reference/checkpoint.md): round trips, tamper cases, nothing half-loaded, no pickle."""

from __future__ import annotations

import copy
import json
import pickle
import zipfile

import pytest
import torch

import aitune.torch as ait
from aitune import exceptions as errors
from aitune._native import _C
from aitune.torch.backend import TorchEagerBackend, TorchInductorAotBackend, TorchInductorJitBackend
from aitune.torch.backend.backend import saved_plan
from aitune.torch.module.state import ModuleState


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def _strategy(backend):
    return ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)


def _tuned(backend, name="mlp"):
    model = _mlp()
    reference = copy.deepcopy(model)
    m = ait.Module(model, name, strategy=_strategy(backend))
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2, 4], device="cpu")
    return m, reference


def _rewrite(src, dst, edit_manifest=None, drop=(), extra=None, replace=None):
    """Copies an archive entry by entry through the native writer, optionally editing it."""
    reader = _C.ArchiveReader(str(src))
    manifest = json.loads(reader.manifest())
    writer = _C.ArchiveWriter(str(dst))
    for record in manifest["files"]:
        if record["path"] in drop:
            continue
        data = reader.read(record["path"], record)
        if replace and record["path"] in replace:
            data = replace[record["path"]]
        writer.add_bytes(record["path"], data)
    for name, data in (extra or {}).items():
        writer.add_bytes(name, data)
    if edit_manifest:
        edit_manifest(manifest)
    writer.finish(json.dumps(manifest))
    return dst


@pytest.mark.parametrize("backend_factory", [TorchEagerBackend, TorchInductorJitBackend], ids=["eager", "inductor-jit"])
def test_round_trip_serves_the_same_outputs(tmp_path, backend_factory):
    m, reference = _tuned(backend_factory())
    path = ait.save(m, tmp_path / "mlp.ait")
    assert path.suffix == ".ait" and zipfile.ZipFile(path).namelist()[0] == "manifest.json"
    loaded = ait.load(_mlp_with_random_weights(), path)
    assert loaded.state is ModuleState.TUNED
    for bs in (1, 3):
        x = torch.randn(bs, 6)
        with torch.no_grad():
            torch.testing.assert_close(loaded(x), reference(x), atol=1e-5, rtol=1e-5)


def test_user_dynamic_shapes_come_back_with_the_module(tmp_path):
    """ait.load hands the saved DynamicDim/BatchDim definitions to the loaded module and its graphs
    (a rebuild or a later tuning works with the ranges the user declared; they used to be dropped)."""
    from aitune.torch.graph.dynamic_shapes import BatchDim, DynamicDim

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, x):
            return x * self.w

    shapes = {"x": (BatchDim("batch", 1, 8), DynamicDim("len", 2, 16))}
    m = ait.Module(Scale(), "scale", strategy=_strategy(TorchEagerBackend()), dynamic_shapes=shapes)
    ait.tune(m, [torch.randn(4) for _ in range(3)], batch_sizes=[1, 2], device="cpu")
    path = ait.save(m, tmp_path / "scale.ait")
    loaded = ait.load(Scale(), path)
    assert loaded._self_recorder.dynamic_shapes == shapes
    graphs = [spec for spec, _ in loaded._self_core.tuned.backends]
    assert graphs and all(g.dynamic_shapes == shapes for g in graphs)
    with torch.no_grad():
        torch.testing.assert_close(loaded(torch.ones(3, 9)), torch.ones(3, 9))


def _mlp_with_random_weights():
    torch.manual_seed(123)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def test_aot_round_trip_needs_no_weights(tmp_path, aoti_loads):
    m, reference = _tuned(TorchInductorAotBackend())
    path = ait.save(m, tmp_path / "aot.ait")
    manifest = json.loads(_C.ArchiveReader(str(path)).manifest())
    assert manifest["modules"][0]["weights"] is None  # the package bakes the weights in
    backend = manifest["modules"][0]["graphs"][0]["backend"]
    assert backend["native"] is True and backend["artifacts"]["package"].endswith("model.pt2")
    target = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to("meta")
    loaded = ait.load(target, path)
    x = torch.randn(3, 6)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), reference(x), atol=1e-5, rtol=1e-5)


def test_loading_never_unpickles(tmp_path, monkeypatch):
    m, reference = _tuned(TorchEagerBackend())
    path = ait.save(m, tmp_path / "m.ait")

    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used while loading")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    loaded = ait.load(_mlp_with_random_weights(), path)
    x = torch.randn(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), reference(x))


def test_default_storage_writes_under_checkpoints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m, _ = _tuned(TorchEagerBackend())
    path = ait.save(m, "model.pt")
    assert path == tmp_path / "checkpoints" / "model.ait" or path.resolve() == (tmp_path / "checkpoints/model.ait")
    with pytest.raises(FileExistsError, match="already exists"):
        ait.save(m, "model.pt", ait.LocalTorchStorage(overwrite_checkpoint_on_tune=False))


def test_saving_an_untuned_module_fails():
    m = ait.Module(_mlp(), "untuned")
    with pytest.raises(RuntimeError, match="Module is not tuned. Cannot save state_dict."):
        ait.save(m, "x.ait")


def test_pipeline_round_trip(tmp_path):
    class Pipeline:
        pass

    m, reference = _tuned(TorchEagerBackend(), name="encoder")
    pipe = Pipeline()
    pipe.encoder = m
    pipe.scale = 2.0
    path = ait.save(pipe, tmp_path / "pipe.ait")
    fresh = Pipeline()
    fresh.encoder = _mlp_with_random_weights()
    out = ait.load(fresh, path)
    assert out is fresh and isinstance(fresh.encoder, ait.Module)
    x = torch.randn(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(fresh.encoder(x), reference(x))
    with pytest.raises(ValueError, match="No tuned modules found in the pipeline"):
        ait.save(Pipeline(), tmp_path / "empty.ait")
    other = Pipeline()
    with pytest.raises(ValueError, match=r"Some modules in the state_dict were not found in the pipeline: \{'encoder'"):
        ait.load(other, path)
    with pytest.raises(ValueError, match=r"Some modules in the device_map were not found: \['nope'\]"):
        ait.load(fresh, path, device_map={"nope": "cpu"})


def test_a_module_holding_a_tuned_submodule_round_trips(tmp_path):
    """ait.save of an nn.Module whose child is an ait.Module (it refused with "Module is not tuned":
    named_modules() never yields the proxy); ait.load puts a tuned module back in its place and
    the rest of the weights back in the root."""

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = _mlp()
            self.head = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.head(self.encoder(x))

    torch.manual_seed(1)
    outer = Outer().eval()
    outer.encoder = ait.Module(outer.encoder, "encoder", strategy=_strategy(TorchEagerBackend()))
    ait.tune(outer, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
    path = ait.save(outer, tmp_path / "outer.ait", include_weights=True)
    torch.manual_seed(2)
    fresh = Outer().eval()
    assert ait.load(fresh, path) is fresh and isinstance(fresh.encoder, ait.Module)
    x = torch.randn(3, 6)
    with torch.no_grad():
        torch.testing.assert_close(fresh(x), outer(x))


# -- tampering ---------------------------------------------------------------------------------
@pytest.fixture
def saved(tmp_path):
    m, reference = _tuned(TorchEagerBackend())
    return ait.save(m, tmp_path / "good.ait"), reference


def _untouched_after(path, error, match):
    target = _mlp_with_random_weights()
    before = copy.deepcopy(target.state_dict())
    with pytest.raises(error, match=match):
        ait.load(target, path)
    assert not isinstance(target, ait.Module)
    for k, v in target.state_dict().items():
        assert torch.equal(v, before[k]), "a failed load must leave the module untouched"


def test_flipped_byte_is_detected(saved, tmp_path):
    path, _ = saved
    data = bytearray(path.read_bytes())
    reader = _C.ArchiveReader(str(path))
    manifest = json.loads(reader.manifest())
    record = next(f for f in manifest["files"] if f["path"].endswith("weights.safetensors"))
    blob = reader.read(record["path"], record)
    offset = bytes(data).find(blob)
    data[offset + len(blob) // 2] ^= 0xFF
    bad = tmp_path / "flipped.ait"
    bad.write_bytes(bytes(data))
    _untouched_after(bad, errors.CorruptCheckpointError, "Failed to verify SHA hashes for files")


def test_missing_and_unlisted_entries_are_detected(saved, tmp_path):
    path, _ = saved
    manifest = json.loads(_C.ArchiveReader(str(path)).manifest())
    weights = next(f["path"] for f in manifest["files"] if f["path"].endswith("weights.safetensors"))
    missing = _rewrite(
        path, tmp_path / "missing.ait", drop=(weights,), edit_manifest=lambda m: m.update(files=manifest["files"])
    )
    _untouched_after(missing, errors.CorruptCheckpointError, "Failed to verify SHA hashes for files")
    unlisted = _rewrite(
        path,
        tmp_path / "unlisted.ait",
        extra={"modules/0/evil.bin": b"x"},
        edit_manifest=lambda m: m.update(files=manifest["files"]),
    )
    _untouched_after(unlisted, errors.CorruptCheckpointError, "is not listed in the manifest")


def test_unknown_format_version_and_truncation(saved, tmp_path):
    path, _ = saved
    future = _rewrite(path, tmp_path / "future.ait", edit_manifest=lambda m: m.update(format_version=3))
    _untouched_after(
        future,
        errors.UnsupportedCheckpointError,
        r"Unsupported checkpoint format_version 3 \(this aitune reads 1 and 2\)",
    )
    truncated = tmp_path / "truncated.ait"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    _untouched_after(
        truncated, errors.CorruptCheckpointError, r"is corrupt: no end-of-central-directory record \(truncated"
    )
    with pytest.raises(errors.CheckpointNotFoundError, match="Checkpoint file not found"):
        ait.load(_mlp(), tmp_path / "nope.ait")


def test_reference_format_is_refused(tmp_path):
    bad = tmp_path / "reference.ait"
    writer = _C.ArchiveWriter(str(bad))
    writer.add_bytes("state_dict.pt", b"\x80\x04pickled")
    writer.finish(json.dumps({"files": writer.files()}))
    _untouched_after(bad, errors.UnsupportedCheckpointError, "pickled state")


def test_incompatible_fingerprint_raises_or_retunes(tmp_path, aoti_loads):
    from aitune.torch.config import config

    config.device_after_tuning = "cpu"  # keep the weights so the checkpoint can carry them
    m, reference = _tuned(TorchInductorAotBackend(), name="aotm")
    path = ait.save(m, tmp_path / "aot.ait", include_weights=True)
    old = _rewrite(path, tmp_path / "old.ait", edit_manifest=lambda man: man["fingerprint"].update(torch="1.0.0"))
    target = _mlp()
    with pytest.raises(errors.IncompatibleCheckpointError) as info:
        ait.load(target, old)
    assert ("torch", "1.0.0", torch.__version__) in info.value.mismatches
    assert "torch: saved 1.0.0, current" in str(info.value)
    loaded = ait.load(_mlp(), old, on_incompatible="retune")
    x = torch.randn(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), reference(x), atol=1e-5, rtol=1e-5)


class _TwoOutputs(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return x * 2, {"sum": x.sum(dim=1)}


def test_output_paths_of_a_backend_served_through_cuda_graphs():
    # TensorRT, ONNX Runtime and Torch-TensorRT AOT have no native runner of their own: with
    # use_cuda_graphs the shared CUDA-graph serving is their native runner, and saving must name
    # the access path of each of its outputs without a backend-specific hook.
    from aitune.torch.backend.common.cuda_graphs import CudaGraphServing
    from aitune.torch.checkpoint.entry_writer import _output_paths

    m = ait.Module(_TwoOutputs(), "two_outputs")
    x = torch.randn(2, 3)
    with torch.no_grad():
        m(x)
    backend = TorchEagerBackend()
    backend.cuda_graphs.serving = CudaGraphServing(m.module.forward, m.graph_specs[0], settings=(1, True))
    saved = saved_plan(backend)
    with pytest.raises(RuntimeError, match="has not run yet"):
        _output_paths(saved)
    backend.cuda_graphs.serving._flat_call(x)  # the runner's first (warm-up) call, which records the outputs
    saved = saved_plan(backend)
    assert saved.input_order == (0,) and saved.outputs.num_outputs == 2
    assert _output_paths(saved) == ["output[0]", 'output[1]["sum"]']
