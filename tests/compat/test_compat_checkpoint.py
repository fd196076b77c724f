"""Checkpoint helpers AITune documents for custom backends: ArtifactPath and LocalTorchStorage
(save/load of a state dict, sha_type "512"), in aitune's no-pickle format."""

import json
import zipfile
from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune._native import _C
from aitune.exceptions import CorruptCheckpointError
from aitune.torch.checkpoint.artifact import ArtifactPath
from aitune.torch.checkpoint.local_torch_storage import LocalTorchStorage


def test_artifact_path_is_its_effective_path(tmp_path):
    artifact = ArtifactPath(tmp_path, "engine/model.plan")
    assert artifact.path == tmp_path / "engine" / "model.plan"
    assert str(artifact) == str(tmp_path / "engine" / "model.plan")
    assert artifact.relative_path == Path("engine/model.plan") and artifact.root == tmp_path
    assert artifact == ArtifactPath(str(tmp_path), Path("engine/model.plan"))  # str or Path


@pytest.mark.parametrize("relative", ["/abs/model.plan", "../model.plan", "a/../../model.plan"])
def test_artifact_path_rejects_absolute_and_escaping_paths(tmp_path, relative):
    with pytest.raises(ValueError, match="relative_path must"):
        ArtifactPath(tmp_path, relative)


def test_from_existing(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "model.bin").write_bytes(b"x")
    artifact = ArtifactPath.from_existing(tmp_path / "sub" / "model.bin", root=tmp_path)
    assert artifact.relative_path == Path("sub/model.bin")
    with pytest.raises(FileNotFoundError, match="Artifact path does not exist"):
        ArtifactPath.from_existing(tmp_path / "missing.bin", root=tmp_path)
    with pytest.raises(ValueError, match="is outside root"):
        ArtifactPath.from_existing(tmp_path / "sub" / "model.bin", root=tmp_path / "other")


def _state(tmp_path):
    folder = tmp_path / "build"
    (folder / "engine").mkdir(parents=True)
    (folder / "engine" / "model.plan").write_bytes(b"\x00plan")
    (folder / "engine" / "profiles.json").write_text("{}")
    return {
        "weights": {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(2, dtype=torch.float16)},
        "engine": ArtifactPath.from_existing(folder / "engine", root=folder),
        "file": ArtifactPath(folder, "engine/model.plan"),
        "device": torch.device("cpu"),
        "dtype": torch.bfloat16,
        "steps": [1, 2.5, "three", None, (True, Path("/x/y"))],
    }


@pytest.mark.parametrize("sha_type", ["256", "512"])
def test_local_torch_storage_round_trips_a_state_dict(tmp_path, sha_type):
    storage = LocalTorchStorage(base_folder=tmp_path / "checkpoints", sha_type=sha_type)
    written = storage.save("state", _state(tmp_path))
    assert written == tmp_path / "checkpoints" / "state.ait"
    with zipfile.ZipFile(written) as archive:
        names = archive.namelist()
    assert not any(n.endswith((".pt", ".pkl")) for n in names), names  # nothing pickled
    manifest = json.loads(_C.ArchiveReader(str(written)).manifest())
    assert (manifest["sha512"] is not None) == (sha_type == "512")

    loaded = storage.load("state.ait")
    torch.testing.assert_close(loaded["weights"]["w"], torch.arange(6.0).reshape(2, 3))
    assert loaded["weights"]["b"].dtype == torch.float16
    assert loaded["device"] == torch.device("cpu") and loaded["dtype"] is torch.bfloat16
    assert loaded["steps"] == [1, 2.5, "three", None, (True, Path("/x/y"))]
    # Artifacts come back as ArtifactPaths inside the extracted checkpoint, folders included.
    assert isinstance(loaded["engine"], ArtifactPath) and loaded["engine"].relative_path == Path("engine")
    assert (loaded["engine"].path / "profiles.json").read_text() == "{}"
    assert loaded["file"].path.read_bytes() == b"\x00plan"
    assert not str(loaded["file"]).startswith(str(tmp_path / "build"))


def test_sha512_mismatch_is_reported_by_name(tmp_path, monkeypatch):
    from aitune.torch.checkpoint import storage as storage_module

    record = storage_module.Sha512Recorder.add_bytes

    def record_a_wrong_digest(self, name, data):  # as if the entry had changed after it was hashed
        record(self, name, data)
        self.digests[name] = "0" * 128

    storage = LocalTorchStorage(base_folder=tmp_path, sha_type="512")
    with monkeypatch.context() as patch:
        patch.setattr(storage_module.Sha512Recorder, "add_bytes", record_a_wrong_digest)
        storage.save("state", {"blob": torch.tensor([1.0])})
    with pytest.raises(
        CorruptCheckpointError, match=r"Failed to verify SHA hashes for files: \['state/state.safetensors'\]"
    ):
        storage.load("state")
    LocalTorchStorage(base_folder=tmp_path, sha_type="512").save("state", {"blob": torch.tensor([1.0])})
    assert storage.load("state")["blob"].tolist() == [1.0]


def test_invalid_sha_type():
    with pytest.raises(ValueError, match="sha_type must be '256' or '512', got '384'"):
        LocalTorchStorage(sha_type="384")


def test_ait_save_with_sha512_records_and_verifies_every_entry(tmp_path, cpu_eager_strategy):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4)).eval()
    module = ait.Module(model, "sha512-net", strategy=cpu_eager_strategy)
    ait.tune(module, [torch.randn(4) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    storage = LocalTorchStorage(base_folder=tmp_path, sha_type="512")
    path = ait.save(module, "net", storage=storage)
    manifest = json.loads(_C.ArchiveReader(str(path)).manifest())
    assert set(manifest["sha512"]) == {f["path"] for f in manifest["files"]}
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 4)).eval()
    loaded = ait.load(fresh, "net", storage=storage)
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x))
