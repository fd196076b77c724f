"""A hostile or damaged `.ait` never crashes, escapes, imports or loads wrong (issue 17;
docs/guide.md "Threat model"). One test (or a parametrised case) per finding 1-16; the GPU round
trips (finding 17) are in test_checkpoint_gpu.py."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune import exceptions as errors
from aitune.torch.backend import TorchEagerBackend, TorchInductorAotBackend
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState

from checkpoint_tools import read_archive, rewrite, write_archive
from support import aitune_cli


def _mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def _strategy(backend):
    return ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)


def _save(backend, path: Path, name: str = "mlp", **save_kwargs) -> Path:
    m = ait.Module(_mlp(), name, strategy=_strategy(backend))
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2, 4], device="cpu")
    return ait.save(m, path, **save_kwargs)


@pytest.fixture
def eager_ckpt(tmp_path) -> Path:
    return _save(TorchEagerBackend(), tmp_path / "eager.ait")


@pytest.fixture(scope="module")
def aot_ckpt(tmp_path_factory, aoti_loads) -> Path:
    return _save(TorchInductorAotBackend(), tmp_path_factory.mktemp("aot") / "aot.ait", name="aot")


def _refused(path: Path, error: type, fragment: str) -> errors.AITuneError:
    """ait.load refuses `path` with `error` naming `fragment`, and the target module is untouched."""
    target = _mlp(seed=1)
    before = copy.deepcopy(target.state_dict())
    with pytest.raises(error) as info:
        ait.load(target, path)
    assert fragment in str(info.value), str(info.value)
    assert not isinstance(target, ait.Module)
    for k, v in target.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed although the load failed"
    return info.value


def _graph(manifest: dict, i: int = 0) -> dict:
    return manifest["modules"][0]["graphs"][i]


def _identity(m: dict) -> str:
    """The backend entry's identity field: "name" in format 2, "class" (a class path) in format 1."""
    return "name" if "name" in _graph(m)["backend"] else "class"


# -- 1. artifact paths -------------------------------------------------------------------------
@pytest.mark.parametrize("package", ["/abs/x.pt2", "../outside.pt2", "modules/0/graphs/0/samples/0.json"])
def test_artifact_paths_must_be_listed_members_of_their_graph(eager_ckpt, tmp_path, package):
    bad = rewrite(
        eager_ckpt,
        tmp_path / "bad.ait",
        edit_manifest=lambda m: _graph(m)["backend"]["artifacts"].update(package=package),
    )
    _refused(bad, errors.CorruptCheckpointError, f"names '{package}'")


def test_aot_package_outside_the_archive_is_not_loaded(aot_ckpt, tmp_path):
    outside = tmp_path / "outside.pt2"
    _, members = read_archive(aot_ckpt)
    package = next(k for k in members if k.endswith("model.pt2"))
    outside.write_bytes(members[package])
    bad = rewrite(
        aot_ckpt,
        tmp_path / "bad.ait",
        edit_manifest=lambda m: _graph(m)["backend"]["artifacts"].update(package=str(outside)),
    )
    _refused(bad, errors.CorruptCheckpointError, "which is not a listed file")
    r = subprocess.run(
        [aitune_cli(), "run", str(bad), "--device", "cpu"],
        capture_output=True,
        text=True,
        env=dict(os.environ, AITUNE_CACHE_DIR=str(tmp_path / "c")),
        timeout=300,
    )
    assert r.returncode == 3, r.stderr


# -- 2. a damaged byte in the extraction cache -------------------------------------------------
def test_a_changed_byte_in_the_extraction_cache_is_extracted_again(aot_ckpt):
    x = torch.randn(2, 6)
    first = ait.load(_mlp(), aot_ckpt)
    with torch.no_grad():
        expected = first(x)
    [package] = list((Path(config.cache_dir) / "checkpoints").rglob("model.pt2"))
    data = bytearray(package.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte different
    package.write_bytes(bytes(data))
    again = ait.load(_mlp(), aot_ckpt)
    assert package.read_bytes() != bytes(data), "the damaged file was replaced from the archive"
    with torch.no_grad():
        torch.testing.assert_close(again(x), expected)


# -- 3. names that become paths ----------------------------------------------------------------
@pytest.mark.parametrize("name", ["/elsewhere/x", "../../x", "a/b", ""])
def test_module_names_cannot_escape_the_cache(eager_ckpt, tmp_path, name):
    bad = rewrite(eager_ckpt, tmp_path / "bad.ait", edit_manifest=lambda m: m["modules"][0].update(name=name))
    _refused(bad, errors.CorruptCheckpointError, "must be a module name usable as a folder name")
    assert not Path("/elsewhere").exists()


def test_graph_names_cannot_escape_the_cache(eager_ckpt, tmp_path):
    bad = rewrite(eager_ckpt, tmp_path / "bad.ait", edit_manifest=lambda m: _graph(m).update(name="../../g"))
    _refused(bad, errors.CorruptCheckpointError, "must be a graph name usable as a folder name")


@pytest.mark.parametrize("prefix", ["__class__", "0.__dict__", "training"])
def test_module_prefixes_reach_only_modules(eager_ckpt, tmp_path, prefix):
    bad = rewrite(eager_ckpt, tmp_path / "bad.ait", edit_manifest=lambda m: m["modules"][0].update(prefix=prefix))
    target = torch.nn.Sequential(_mlp())
    with pytest.raises((errors.CorruptCheckpointError, ValueError)):
        ait.load(target, bad)
    assert type(target) is torch.nn.Sequential and target.training in (True, False)


# -- 4. nothing is imported because the file names it --------------------------------------------
@pytest.fixture
def evil_module_dir(tmp_path, monkeypatch):
    """A module in the working directory that records being imported."""
    witness = tmp_path / "imported.txt"
    (tmp_path / "aitune_evil_backend.py").write_text(
        f"open({str(witness)!r}, 'w').write('imported')\n"
        "import collections\nclass Thing(collections.OrderedDict):\n    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield witness
    sys.modules.pop("aitune_evil_backend", None)


def test_a_backend_class_named_by_the_file_is_not_imported(eager_ckpt, tmp_path, evil_module_dir):
    bad = rewrite(
        eager_ckpt,
        tmp_path / "bad.ait",
        edit_manifest=lambda m: _graph(m)["backend"].update({_identity(m): "aitune_evil_backend.EvilBackend"}),
    )
    _refused(bad, errors.UnsupportedCheckpointError, "Unknown backend type: aitune_evil_backend.EvilBackend")
    assert not evil_module_dir.exists() and "aitune_evil_backend" not in sys.modules


def test_a_sample_type_named_by_the_file_is_not_imported(eager_ckpt, tmp_path, evil_module_dir):
    manifest, members = read_archive(eager_ckpt)
    prefix = _graph(manifest)["samples"][0]
    skeleton = json.loads(members[prefix + ".json"])
    skeleton["kwargs"] = {"mapping": "aitune_evil_backend:Thing", "items": []}
    members[prefix + ".json"] = json.dumps(skeleton).encode()
    bad = write_archive(tmp_path / "bad.ait", manifest, members)
    _refused(bad, errors.UnsupportedCheckpointError, "module 'aitune_evil_backend' is not imported")
    assert not evil_module_dir.exists()


# -- 5. deep nesting -----------------------------------------------------------------------------
def test_deeply_nested_manifest_is_refused_by_python_and_the_cli(eager_ckpt, tmp_path):
    manifest, members = read_archive(eager_ckpt)
    text = json.dumps(manifest)
    deep = "[" * 80000 + "]" * 80000
    bad = write_archive(
        tmp_path / "deep.ait",
        text.replace('"fingerprint": {', f'"deep": {deep}, "fingerprint": {{', 1),
        members,
        fix_records=False,
    )
    _refused(bad, errors.CorruptCheckpointError, "nests deeper than 64 levels")
    r = subprocess.run([aitune_cli(), "inspect", str(bad)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, (r.returncode, r.stderr[-500:])
    assert "nests deeper than 64 levels" in r.stderr


def test_deeply_nested_sample_skeleton_is_refused(eager_ckpt, tmp_path):
    manifest, members = read_archive(eager_ckpt)
    prefix = _graph(manifest)["samples"][0]
    members[prefix + ".json"] = (
        '{"args": ' + '{"tuple": [' * 5000 + "]}" * 5000 + ', "kwargs": {"dict": []}, "batch_size": 1}'
    ).encode()
    bad = write_archive(tmp_path / "bad.ait", manifest, members)
    _refused(bad, errors.CorruptCheckpointError, "nests deeper than 64 levels")


# -- 6. threads saving to one path -----------------------------------------------------------------
def test_threads_saving_to_one_path_all_succeed_and_leave_a_whole_file(tmp_path):
    m = ait.Module(_mlp(), "m", strategy=_strategy(TorchEagerBackend()))
    ait.tune(m, [torch.randn(6) for _ in range(4)], device="cpu")
    path = tmp_path / "shared.ait"
    failures: list[BaseException] = []

    def save_many() -> None:
        for _ in range(3):
            try:
                ait.save(m, path)
                ait.load(_mlp(), path)  # whatever is at the path is a whole, valid checkpoint
            except BaseException as e:  # noqa: BLE001 - collected and asserted below
                failures.append(e)

    threads = [threading.Thread(target=save_many) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
    assert not list(tmp_path.glob("*.tmp-*")), "no temporary file is left behind"


# -- 7. an exception out of ait.tune -------------------------------------------------------------
class _Interrupting(TorchEagerBackend):
    def _build(self, *args, **kwargs):
        raise KeyboardInterrupt


class _Failing(TorchEagerBackend):
    def _build(self, *args, **kwargs):
        raise RuntimeError("build failure while tuning module b")


@pytest.mark.parametrize("failing", [_Interrupting, _Failing], ids=["interrupt", "error"])
def test_an_exception_out_of_ait_tune_leaves_earlier_modules_serving(failing):
    a = ait.Module(_mlp(), "a", strategy=_strategy(TorchEagerBackend()))
    ait.tune(a, [torch.randn(6) for _ in range(2)], device="cpu")
    assert a.state is ModuleState.TUNED
    b = ait.Module(_mlp(seed=2), "b", strategy=_strategy(failing()))
    with pytest.raises(KeyboardInterrupt if failing is _Interrupting else RuntimeError):
        ait.tune(b, [torch.randn(6) for _ in range(2)], device="cpu", ignore_failing_modules=False)
    with torch.no_grad():
        a(torch.randn(1, 6))  # used to raise "module 'a' is deactivated"


# -- 8. damaged manifests that used to load with the caller's weights ------------------------------
def test_no_modules_is_corrupt(eager_ckpt, tmp_path):
    bad = rewrite(eager_ckpt, tmp_path / "bad.ait", edit_manifest=lambda m: m.update(modules=[]))
    _refused(bad, errors.CorruptCheckpointError, "modules is empty")


def test_eager_graph_without_weights_is_corrupt(eager_ckpt, tmp_path):
    bad = rewrite(
        eager_ckpt,
        tmp_path / "bad.ait",
        drop=("modules/0/weights.safetensors",),
        edit_manifest=lambda m: m["modules"][0].update(weights=None),
    )
    _refused(bad, errors.CorruptCheckpointError, "modules[0].weights is null, but")


def test_a_byte_flipped_manifest_is_refused(eager_ckpt, tmp_path):
    raw = bytearray(eager_ckpt.read_bytes())
    at = raw.index(b'"strict_mode": true')
    raw[at + len(b'"strict_mode": ')] = ord("T")  # one byte of the manifest, sizes unchanged
    bad = tmp_path / "flipped.ait"
    bad.write_bytes(bytes(raw))
    _refused(bad, errors.CorruptCheckpointError, "manifest.json does not match its CRC-32")


def test_a_results_store_file_is_not_a_checkpoint(eager_ckpt, tmp_path):
    """Store files hold no weights by design; marking a checkpoint as one must not let it load
    with the caller's weights."""
    bad = rewrite(
        eager_ckpt,
        tmp_path / "bad.ait",
        drop=("modules/0/weights.safetensors",),
        edit_manifest=lambda m: (m.update(kind="aitune.results"), m["modules"][0].update(weights=None)),
    )
    _refused(bad, errors.UnsupportedCheckpointError, "tuning-results store")


# -- 9. every failure is a documented error ---------------------------------------------------------
MUTATIONS = {
    "alias to a missing tensor": lambda m: m["modules"][0]["weights"]["aliases"].update({"x": "nope"}),
    "key tokens of the wrong type": lambda m: _graph(m).update(key_tokens=["a"]),
    "shape lists of the wrong length": lambda m: _graph(m)["input_spec"]["leaves"][0].update(min_shape=[1]),
    "unknown axis kind": lambda m: _graph(m)["input_spec"]["leaves"][0].update(axis_kinds=["weird", "static"]),
    "config field the backend lacks": lambda m: _graph(m)["backend"]["config"].update(bogus=1),
    "forward parameter kind": lambda m: m["modules"][0]["forward_signature"][0].update(kind="ALL"),
    "fingerprint holding a list": lambda m: m["fingerprint"].update(torch=[1]),
    "non-string class": lambda m: _graph(m)["backend"].update({_identity(m): 5}),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_malformed_manifest_fields_are_corrupt_checkpoints(eager_ckpt, tmp_path, mutation):
    bad = rewrite(eager_ckpt, tmp_path / "bad.ait", edit_manifest=MUTATIONS[mutation])
    with pytest.raises((errors.CorruptCheckpointError, errors.UnsupportedCheckpointError)):
        ait.load(_mlp(), bad)


def test_a_damaged_entry_name_is_a_corrupt_checkpoint_not_a_unicode_error(eager_ckpt, tmp_path):
    """Found by tests/fuzz (seed 20261201, mutant 460): the reader's message quoted the damaged,
    non-UTF-8 name, and turning it into a Python string raised UnicodeDecodeError instead."""
    raw = bytearray(eager_ckpt.read_bytes())
    at = raw.rindex(b"modules/0/weights.safetensors")  # the central directory's copy of the name
    raw[at + 3] = 0xDF
    bad = tmp_path / "name.ait"
    bad.write_bytes(bytes(raw))
    _refused(bad, errors.CorruptCheckpointError, "\ufffd")


def test_a_spec_with_a_duplicated_leaf_is_refused(eager_ckpt, tmp_path):
    """Found by tests/fuzz (seed 20261201, mutant 962): a second copy of the input leaf loaded, and the
    first call read past the call's leaves in the native dispatcher (SIGSEGV)."""

    def duplicate(m: dict) -> None:
        leaves = _graph(m)["input_spec"]["leaves"]
        leaves.append(copy.deepcopy(leaves[0]))

    bad = rewrite(eager_ckpt, tmp_path / "dup.ait", edit_manifest=duplicate)
    _refused(bad, errors.CorruptCheckpointError, "appears twice")


def test_damaged_sample_member_is_corrupt(eager_ckpt, tmp_path):
    manifest, members = read_archive(eager_ckpt)
    prefix = _graph(manifest)["samples"][0]
    members[prefix + ".safetensors"] = b"\xff" * 16
    bad = write_archive(tmp_path / "bad.ait", manifest, members)
    _refused(bad, errors.CorruptCheckpointError, "is corrupt")
    members[prefix + ".json"] = b"\xff\xfe not utf-8"
    bad = write_archive(tmp_path / "bad2.ait", manifest, members)
    _refused(bad, errors.CorruptCheckpointError, "is corrupt")


# -- 10. a damaged .so with valid hashes -------------------------------------------------------------
def test_a_package_whose_library_is_damaged_fails_cleanly(aot_ckpt, tmp_path):
    import io
    import zipfile

    manifest, members = read_archive(aot_ckpt)
    package = next(k for k in members if k.endswith("model.pt2"))
    inner = zipfile.ZipFile(io.BytesIO(members[package]))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
        for info in inner.infolist():
            data = bytearray(inner.read(info))
            if info.filename.endswith(".so"):
                for at in (0x40, len(data) // 2):  # two flipped bits: the header and the code
                    data[at] ^= 0x10
            z.writestr(info, bytes(data))
    members[package] = out.getvalue()
    bad = write_archive(tmp_path / "bad.ait", manifest, members)  # hashes recomputed: only the content is bad
    _refused(bad, errors.CorruptCheckpointError, "is corrupt")


# -- 11-15. the CLI ------------------------------------------------------------------------------------
def _cli(*args, cache: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [aitune_cli(), *map(str, args)],
        capture_output=True,
        text=True,
        errors="replace",
        env=dict(os.environ, AITUNE_CACHE_DIR=str(cache)),
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "edit",
    [lambda m: m.update(modules=[]), lambda m: m["modules"][0].update(graphs=[]), lambda m: _graph(m).pop("backend")],
    ids=["no modules", "no graphs", "no backend"],
)
def test_cli_exit_code_for_broken_manifests_is_3(eager_ckpt, tmp_path, edit):
    bad = rewrite(eager_ckpt, tmp_path / "bad.ait", edit_manifest=edit)
    for command in ("inspect", "run"):
        r = _cli(command, bad, cache=tmp_path / "c")
        assert r.returncode == 3, (command, r.returncode, r.stderr)


def test_cli_refuses_an_inputs_file_whose_shape_overflows(aot_ckpt, tmp_path):
    header = json.dumps({"input_x": {"dtype": "F32", "shape": [2**32, 2**32], "data_offsets": [0, 0]}}).encode()
    inputs = tmp_path / "in.safetensors"
    inputs.write_bytes(len(header).to_bytes(8, "little") + header)
    r = _cli("run", aot_ckpt, "--device", "cpu", "--inputs", inputs, cache=tmp_path / "c")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "more elements than 2^64" in r.stderr and "Exception raised from" not in r.stderr


@pytest.mark.parametrize("min_shape", [[2**48, 6], [2**48, 2**48]], ids=["too-large", "overflows"])
def test_cli_bench_random_on_a_huge_recorded_shape_is_a_usage_error(aot_ckpt, tmp_path, min_shape):
    """Issue 27: a recorded minimum of 2^48 made `bench --random` print an internal error with a
    24-frame backtrace; it is InvalidArgument (exit 2) naming the input, the shape and the fix."""
    manifest, members = read_archive(aot_ckpt)
    graph = _graph(manifest)
    graph["input_spec"]["leaves"][0].update(min_shape=min_shape, max_shape=min_shape)
    graph["backend"]["profiles"] = None
    for prefix in graph.pop("samples"):
        members.pop(prefix + ".json")
        members.pop(prefix + ".safetensors")
    graph["samples"] = []
    bad = write_archive(tmp_path / "huge.ait", manifest, members)
    r = _cli("bench", bad, "--device", "cpu", "--random", "--iterations", "1", cache=tmp_path / "c")
    assert r.returncode == 2, (r.returncode, r.stdout[-300:], r.stderr[-600:])
    assert "InvalidArgument: bench input 'input_input'" in r.stderr and "cannot be made at shape" in r.stderr, r.stderr
    assert "pass a smaller --shape or --batch-size" in r.stderr
    assert "Exception raised from" not in r.stderr and "frame #" not in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["4294967297", "-1", "1e3", "99999999999"])
def test_cli_integer_options_do_not_wrap(aot_ckpt, tmp_path, value):
    r = _cli("bench", aot_ckpt, "--device", "cpu", "--batch-size", value, cache=tmp_path / "c")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "--batch-size takes a positive integer" in r.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a GPU")
@pytest.mark.parametrize("device,code", [("cuda:0", 4), ("99", 4), ("-5", 2), ("cuda:-1", 2)])
def test_cli_device_that_cannot_be_used_is_an_error(aot_ckpt, tmp_path, device, code):
    r = _cli("run", aot_ckpt, "--device", device, cache=tmp_path / "c")
    assert r.returncode == code, (r.returncode, r.stderr)


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "model.ait"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(errors.AITuneError, match="is not a regular file"):
        ait.load(_mlp(), fifo)
    r = _cli("inspect", fifo, cache=tmp_path / "c", timeout=30)
    assert r.returncode == 2 and "is not a regular file" in r.stderr
    assert time.monotonic() - start < 30


# -- 16. a read-only cache ----------------------------------------------------------------------------
def _chattr(path: Path, on: bool) -> bool:
    return subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True).returncode == 0


@pytest.fixture
def read_only(tmp_path):
    """Makes folders immutable (even root cannot write them); undone afterwards."""
    frozen: list[Path] = []

    def freeze(*paths: Path) -> None:
        for p in paths:
            if not _chattr(p, True):
                pytest.skip("chattr +i is not available here (needs ext2/3/4 and root)")
            frozen.append(p)

    yield freeze
    for p in reversed(frozen):
        _chattr(p, False)


def test_eager_load_works_with_a_read_only_cache(eager_ckpt, tmp_path, read_only):
    cache = tmp_path / "ro-cache"
    cache.mkdir()
    config.cache_dir = cache
    read_only(cache)
    loaded = ait.load(_mlp(), eager_ckpt)
    with torch.no_grad():
        loaded(torch.randn(2, 6))


def test_complete_aot_extraction_in_a_read_only_cache_loads(aot_ckpt, tmp_path, read_only):
    ait.load(_mlp(), aot_ckpt)  # extracts (and probes) into the cache
    root = Path(config.cache_dir) / "checkpoints"
    for lock in root.glob("*.lock"):
        lock.unlink()  # a cache copied without its lock files
    folders = [root, *[p for p in root.rglob("*") if p.is_dir()]]
    read_only(*folders)
    loaded = ait.load(_mlp(), aot_ckpt)
    with torch.no_grad():
        loaded(torch.randn(2, 6))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA (the device must be missing)")
def test_a_graph_saved_for_a_missing_device_is_incompatible_not_a_raw_error(eager_ckpt, tmp_path):
    """Fuzzer find (seed 20261201, mutant 11416): a graph whose backend device says cuda:0, loaded
    where CUDA is missing, raised torch's raw "Found no NVIDIA driver" RuntimeError from deep in
    the restore. It is now refused up front, naming the graph, the device and the fix."""
    bad = rewrite(
        eager_ckpt, tmp_path / "cuda.ait", edit_manifest=lambda m: _graph(m)["backend"].update(device="cuda:0")
    )
    e = _refused(
        bad,
        errors.IncompatibleCheckpointError,
        "device: saved cuda:0, current 0 CUDA device(s) here (module 'mlp' graph '0'",
    )
    assert "device_map={'mlp': 'cpu'}" in str(e)
    loaded = ait.load(_mlp(), bad, device_map={"mlp": "cpu"})  # the fix the message names
    x = torch.randn(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), _mlp()(x))


def test_a_graph_device_that_is_not_a_torch_device_is_corrupt(eager_ckpt, tmp_path):
    bad = rewrite(eager_ckpt, tmp_path / "dev.ait", edit_manifest=lambda m: _graph(m)["backend"].update(device="gpu7"))
    _refused(bad, (errors.CorruptCheckpointError, errors.IncompatibleCheckpointError), "gpu7")


@pytest.mark.parametrize("value", ["cuda:0", 1, None])
def test_a_config_field_of_the_wrong_type_is_refused(eager_ckpt, tmp_path, value):
    """Fuzzer find (seed 20261201): `autocast_enabled: "cuda:0"` (hashes fixed) loaded as True and
    served autocast outputs. A saved config's scalar fields are type-checked."""

    def edit(m):
        _graph(m)["backend"]["config"]["autocast_enabled"] = value

    bad = rewrite(eager_ckpt, tmp_path / "typed.ait", edit_manifest=edit)
    _refused(bad, errors.CorruptCheckpointError, "autocast_enabled must be bool")


def test_a_damaged_dynamic_shapes_entry_is_corrupt(eager_ckpt, tmp_path):
    """The stored DynamicDim definitions are read back (ait.load passes them on) and checked like
    user input: a range the definition check refuses is a damaged file, named as such."""
    axis = {"kind": "dim", "name": "f", "min": 9, "max": 2, "opt": None}
    bad = rewrite(
        eager_ckpt,
        tmp_path / "bad.ait",
        edit_manifest=lambda m: m["modules"][0].update(dynamic_shapes=[{"path": "input", "shape": [1, axis]}]),
    )
    _refused(bad, errors.CorruptCheckpointError, "dynamic_shapes")
