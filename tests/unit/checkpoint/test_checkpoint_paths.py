"""Every path a checkpoint names, in every field and format, stays inside the archive (issue 27,
findings 1, 2 and 4; docs/guide.md "Threat model"): an own-state backend's artifact folders and
relative paths and its state tensors, a LocalTorchStorage state dict's, in format 1 and 2. Each
is checked by the C++ schema and resolved by checkpoint/paths.py; anything else is a
CorruptCheckpointError and nothing outside the archive is opened. Also the reserved entry names
and graph keys that do not match their graph."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune import exceptions as errors
from aitune.torch.checkpoint.artifact import ArtifactPath
from aitune.torch.checkpoint.storage import LocalTorchStorage
from aitune.torch.config import config

from checkpoint_tools import read_archive, rewrite, write_archive
from own_state_backend import OwnStateBackend
from support import aitune_cli


def _mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def _strategy(backend):
    return ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)


@pytest.fixture
def own_state_ckpt(tmp_path) -> Path:
    m = ait.Module(_mlp(), "m", strategy=_strategy(OwnStateBackend()))
    ait.tune(m, [torch.randn(6) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    return ait.save(m, tmp_path / "own.ait")


@pytest.fixture
def evil_program(tmp_path) -> Path:
    """A TorchScript program outside any checkpoint: code that serves other outputs."""

    class Evil(torch.nn.Module):
        def forward(self, x):
            return torch.full((x.shape[0], 3), 42.0)

    path = tmp_path / "evil" / "program" / "model.ts"
    path.parent.mkdir(parents=True)
    torch.jit.save(torch.jit.script(Evil()), str(path))
    return path


def _backend(manifest: dict) -> dict:
    return manifest["modules"][0]["graphs"][0]["backend"]


def _state_item(state: dict, key: str) -> dict:
    return next(node for k, node in state["dict"] if k == key)


def _refused(path: Path, fragment: str, storage: LocalTorchStorage | None = None) -> str:
    """`path` is refused as corrupt naming `fragment`; nothing outside the archive was restored."""
    OwnStateBackend.restored_paths.clear()
    with pytest.raises(errors.CorruptCheckpointError) as info:
        if storage is not None:
            storage.load(path)
        else:
            ait.load(_mlp(1), path)
    assert fragment in str(info.value), str(info.value)
    assert OwnStateBackend.restored_paths == [], "from_dict ran on a refused file"
    return str(info.value)


def _as_format1(manifest: dict) -> None:
    """The same file as an earlier release wrote it: format 1 names the backend by class path."""
    manifest["format_version"] = 1
    backend = _backend(manifest)
    backend["class"] = backend.pop("name").removeprefix("custom:")


FORMATS = {"format2": lambda m: None, "format1": _as_format1}


def test_an_own_state_checkpoint_round_trips_with_paths_inside_the_extraction(own_state_ckpt):
    loaded = ait.load(_mlp(), own_state_ckpt)
    x = torch.randn(2, 6)
    with torch.no_grad():
        assert torch.allclose(loaded(x), _mlp()(x), atol=1e-5)
    extraction = (Path(config.cache_dir) / "checkpoints").resolve()
    assert OwnStateBackend.restored_paths, "from_dict was given its artifacts"
    for path in OwnStateBackend.restored_paths:
        assert extraction in path.resolve().parents, path


# -- finding 1: an own-state backend's artifact folder, relative path and tensors ----------------
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_an_artifact_folder_outside_the_archive_is_not_loaded(own_state_ckpt, evil_program, tmp_path, fmt):
    """Before: the folder was joined unchecked, so the outside program ran and served 42s."""

    def point_outside(m: dict) -> None:
        FORMATS[fmt](m)
        _state_item(_backend(m)["state"], "program")["artifact"]["folder"] = str(evil_program.parent.parent)

    bad = rewrite(own_state_ckpt, tmp_path / "bad.ait", edit_manifest=point_outside)
    _refused(bad, "artifact.folder must be an entry folder under modules/0/graphs/0/backend/")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_an_artifact_folder_with_dotdot_is_not_loaded(own_state_ckpt, evil_program, tmp_path, fmt):
    extraction = (Path(config.cache_dir) / "checkpoints" / "digest").resolve()
    up = os.path.relpath(evil_program.parent.parent, extraction)

    def climb(m: dict) -> None:
        FORMATS[fmt](m)
        _state_item(_backend(m)["state"], "program")["artifact"]["folder"] = f"modules/0/graphs/0/backend/0/{up}"

    bad = rewrite(own_state_ckpt, tmp_path / "bad.ait", edit_manifest=climb)
    _refused(bad, "artifact.folder must be an entry folder under")


@pytest.mark.parametrize("relative", ["/etc/passwd", "../../../samples/0.json", "program/../../../x"])
def test_an_artifact_relative_path_that_escapes_is_refused(own_state_ckpt, tmp_path, relative):
    bad = rewrite(
        own_state_ckpt,
        tmp_path / "bad.ait",
        edit_manifest=lambda m: _state_item(_backend(m)["state"], "program")["artifact"].update(relative_path=relative),
    )
    _refused(bad, "artifact.relative_path must be a relative path inside its folder")


def test_a_folder_inside_the_archive_that_lacks_the_file_is_corrupt(own_state_ckpt, tmp_path):
    """Before: a raw ValueError from torch.jit.load."""
    bad = rewrite(
        own_state_ckpt,
        tmp_path / "bad.ait",
        edit_manifest=lambda m: _state_item(_backend(m)["state"], "program")["artifact"].update(
            relative_path="program/other.ts"
        ),
    )
    _refused(bad, "which is neither a listed file nor a folder of listed files")


def test_state_tensors_outside_the_archive_are_refused(own_state_ckpt, tmp_path):
    outside = tmp_path / "outside.safetensors"
    from safetensors.torch import save_file

    save_file({"0": torch.tensor([1000.0])}, str(outside))
    bad = rewrite(
        own_state_ckpt, tmp_path / "bad.ait", edit_manifest=lambda m: _backend(m).update(state_tensors=str(outside))
    )
    _refused(bad, "state_tensors names")


def test_a_link_out_of_the_extraction_folder_is_refused(own_state_ckpt, evil_program):
    """The extraction folder is aitune's, but another process may write there: a folder replaced
    by a link to elsewhere (same files, same stamps) must not lead the load outside."""
    ait.load(_mlp(), own_state_ckpt)
    [program] = list((Path(config.cache_dir) / "checkpoints").rglob("program/model.ts"))
    folder = program.parent.parent  # .../modules/0/graphs/0/backend/0
    moved = evil_program.parent.parent.parent / "moved"
    folder.rename(moved)
    folder.symlink_to(moved, target_is_directory=True)
    message = _refused(own_state_ckpt, "resolves outside checkpoint (through a link)")
    assert "backend state: artifact" in message


# -- finding 2: LocalTorchStorage state dicts go through the schema ------------------------------
@pytest.fixture
def state_dict_file(tmp_path) -> Path:
    build = tmp_path / "build"
    (build / "engine").mkdir(parents=True)
    (build / "engine" / "model.plan").write_bytes(b"plan bytes")
    (build / "profiles").mkdir()
    (build / "profiles" / "a.json").write_text("{}")
    state = {
        "weight": torch.arange(4.0),
        "engine": ArtifactPath(build, "engine/model.plan"),
        "profiles": ArtifactPath(build, "profiles"),
        "built_in": Path("/opt/elsewhere"),
    }
    return LocalTorchStorage(tmp_path / "store").save("state", state)


def test_a_state_dict_round_trips_inside_the_extraction(state_dict_file, tmp_path):
    state = LocalTorchStorage(tmp_path / "store").load("state")
    extraction = (Path(config.cache_dir) / "checkpoints").resolve()
    assert torch.equal(state["weight"], torch.arange(4.0))
    assert state["engine"].path.read_bytes() == b"plan bytes"
    assert (state["profiles"].path / "a.json").read_text() == "{}"
    for artifact in (state["engine"], state["profiles"]):
        assert extraction in artifact.path.resolve().parents
    assert state["built_in"] == Path("/opt/elsewhere")  # a plain path value, never opened


def _edited_state_dict(src: Path, dst: Path, edit) -> Path:
    manifest, members = read_archive(src)
    edit(manifest)
    return write_archive(dst, manifest, members, fix_records=False)


STATE_DICT_EDITS = {
    "state_tensors absolute": (
        lambda m, outside: m.update(state_tensors=str(outside)),
        "state_tensors names",
    ),
    "artifact folder absolute": (
        lambda m, outside: _state_item(m["state"], "engine")["artifact"].update(folder="/etc", relative_path="passwd"),
        "artifact.folder must be an entry folder under state/",
    ),
    "artifact folder with dotdot": (
        lambda m, outside: _state_item(m["state"], "engine")["artifact"].update(folder="state/0/../../.."),
        "artifact.folder must be an entry folder under state/",
    ),
    "artifact relative path with dotdot": (
        lambda m, outside: _state_item(m["state"], "engine")["artifact"].update(relative_path="../../x"),
        "artifact.relative_path must be a relative path inside its folder",
    ),
    "artifact file missing": (
        lambda m, outside: _state_item(m["state"], "engine")["artifact"].update(relative_path="engine/other.plan"),
        "which is neither a listed file nor a folder of listed files",
    ),
    "artifacts map": (
        lambda m, outside: m["artifacts"].update(x="/etc/passwd"),
        "artifacts[\"x\"] names '/etc/passwd'",
    ),
    "sha512 of an outside file": (
        lambda m, outside: m.update(sha512={str(outside): "0" * 128}),
        "which is not a listed file",
    ),
    "unknown node": (
        lambda m, outside: m["state"]["dict"].append(["x", {"pickle": "os.system"}]),
        "must be a state node",
    ),
}


@pytest.mark.parametrize("edit", sorted(STATE_DICT_EDITS))
def test_every_path_of_a_state_dict_stays_inside_the_archive(state_dict_file, tmp_path, edit):
    """Before: LocalTorchStorage.load ran no schema; tensors loaded from any safetensors file and
    artifacts came back as ArtifactPath('/etc/passwd') or a path outside the extraction folder."""
    outside = tmp_path / "outside.safetensors"
    from safetensors.torch import save_file

    save_file({"0": torch.tensor([1000.0])}, str(outside))
    change, fragment = STATE_DICT_EDITS[edit]
    bad = _edited_state_dict(state_dict_file, tmp_path / "bad.ait", lambda m: change(m, outside))
    _refused(bad, fragment, storage=LocalTorchStorage(tmp_path))


def test_a_state_dict_that_drops_its_sha512_digests_is_refused(tmp_path):
    storage = LocalTorchStorage(tmp_path, sha_type="512")
    path = storage.save("s", {"w": torch.ones(2)})
    bad = _edited_state_dict(path, tmp_path / "bad.ait", lambda m: m.update(sha512=None))
    _refused(bad, "manifest.sha512 must be an object", storage=storage)


def test_a_checkpoint_is_not_a_state_dict(own_state_ckpt, tmp_path):
    with pytest.raises(errors.UnsupportedCheckpointError, match="is not a state dict saved by LocalTorchStorage.save"):
        LocalTorchStorage(tmp_path).load(own_state_ckpt)


# -- finding 4: reserved entry names, keys that do not match their graph --------------------------
def _cli(*args, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [aitune_cli(), *map(str, args)],
        capture_output=True,
        text=True,
        errors="replace",
        env=dict(os.environ, AITUNE_CACHE_DIR=str(cache)),
        timeout=300,
    )


@pytest.fixture
def eager_ckpt(tmp_path) -> Path:
    from aitune.torch.backend import TorchEagerBackend

    m = ait.Module(_mlp(), "mlp", strategy=_strategy(TorchEagerBackend()))
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
    return ait.save(m, tmp_path / "eager.ait")


@pytest.mark.parametrize("name", [".complete", ".stamps", "modules/0/graphs/0/backend/model.pt2.probed-0"])
def test_reserved_entry_names_are_corrupt_in_python_and_the_cli(eager_ckpt, tmp_path, name):
    """Before: Python refused `.complete` as AITuneUserInputError and the CLI accepted it."""
    bad = rewrite(eager_ckpt, tmp_path / "bad.ait", extra={name: b"x"})
    _refused(bad, f"'{name}' is a name the extraction cache reserves for its own files")
    for command in ("inspect", "run"):
        r = (
            _cli(command, bad, "--device", "cpu", cache=tmp_path / "c")
            if command == "run"
            else _cli(command, bad, cache=tmp_path / "c")
        )
        assert r.returncode == 3, (command, r.returncode, r.stdout[-300:], r.stderr[-300:])
        assert "reserves for its own files" in r.stderr


def test_key_tokens_that_do_not_match_the_stored_sample_are_corrupt(eager_ckpt, tmp_path):
    """Before: the file loaded, then every call raised GraphNotFoundError."""

    def rename_parameter(m: dict) -> None:
        tokens = m["modules"][0]["graphs"][0]["key_tokens"]
        tokens[3] ^= 1  # the hash of the parameter name x

    bad = rewrite(eager_ckpt, tmp_path / "bad.ait", edit_manifest=rename_parameter)
    _refused(bad, "its key_tokens do not match its stored sample's call")


def test_key_tokens_that_do_not_match_the_spec_are_corrupt_without_samples(eager_ckpt, tmp_path):
    def other_rank(m: dict) -> None:
        graph = m["modules"][0]["graphs"][0]
        graph["key_tokens"][-1] = 3  # the tensor x of rank 2
        graph["samples"] = []

    manifest, members = read_archive(eager_ckpt)
    other_rank(manifest)
    members = {k: v for k, v in members.items() if "/samples/" not in k}
    bad = write_archive(tmp_path / "bad.ait", manifest, members)
    _refused(bad, "key_tokens do not match the graph's input spec: leaf 0 is a tensor of rank 3")
    r = _cli("inspect", bad, cache=tmp_path / "c")
    assert r.returncode == 3, r.stderr


def test_the_target_is_unchanged_after_a_refusal(own_state_ckpt, tmp_path):
    target = _mlp(1)
    before = copy.deepcopy(target.state_dict())
    bad = rewrite(own_state_ckpt, tmp_path / "bad.ait", edit_manifest=lambda m: _backend(m).update(state_tensors="/x"))
    with pytest.raises(errors.CorruptCheckpointError):
        ait.load(target, bad)
    assert not isinstance(target, ait.Module)
    assert all(torch.equal(v, before[k]) for k, v in target.state_dict().items())
