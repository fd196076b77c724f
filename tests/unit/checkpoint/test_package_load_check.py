"""An AOTInductor package whose library crashes or hangs, on load or on its first call, is refused
in bounded time with a CorruptCheckpointError and leaves the loading process alive (issue 27,
finding 3; docs/guide.md "Threat model").

The damaged libraries are real shared objects: a small shim compiled here takes the place of the
package's model library. It links the real library (so loading, metadata and the call spec work
as before) and replaces the run entry points -- or its constructor -- by a crash or a hang, as a
bit flip in the right place would. Each load runs in a child Python process, since before the
fix a crash on the first call took the loading process down."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune import exceptions as errors
from aitune.torch.backend import TorchInductorAotBackend
from aitune.torch.config import config

from checkpoint_tools import read_archive, write_archive

SHIMS = {
    "crash on first call": "int AOTInductorModelContainerRun(void) { raise(SIGSEGV); return 1; }\n"
    "int AOTInductorModelContainerRunSingleThreaded(void) { raise(SIGSEGV); return 1; }\n",
    "hang on first call": "int AOTInductorModelContainerRun(void) { for (;;) pause(); }\n"
    "int AOTInductorModelContainerRunSingleThreaded(void) { for (;;) pause(); }\n",
    "hang on load": "__attribute__((constructor)) static void hang(void) { for (;;) pause(); }\n",
    "crash on load": "__attribute__((constructor)) static void crash(void) { raise(SIGSEGV); }\n",
}


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


@pytest.fixture(scope="module")
def aot_ckpt(tmp_path_factory, aoti_loads) -> Path:
    strategy = (
        ait.OneBackendStrategy(TorchInductorAotBackend())
        .enable_performance_validation(False)
        .enable_find_max_batch_size(False)
    )
    m = ait.Module(_mlp(), "aot", strategy=strategy)
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
    return ait.save(m, tmp_path_factory.mktemp("aot") / "aot.ait")


def _damaged(aot_ckpt: Path, folder: Path, behaviour: str, keep_samples: bool = True) -> Path:
    """A copy of the checkpoint whose package's model library is the shim for `behaviour`, with
    every hash recomputed: only the native code is bad."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler (cc or gcc) to build the damaged model library")
    manifest, members = read_archive(aot_ckpt)
    package = next(k for k in members if k.endswith("model.pt2"))
    inner = zipfile.ZipFile(io.BytesIO(members[package]))
    library = next(i for i in inner.infolist() if i.filename.endswith(".so"))
    real = folder / "real"
    real.mkdir(parents=True, exist_ok=True)
    (real / "libreal_model.so").write_bytes(inner.read(library))
    (folder / "shim.c").write_text("#include <signal.h>\n#include <unistd.h>\n" + SHIMS[behaviour])
    shim = folder / "shim.so"
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            str(folder / "shim.c"),
            "-o",
            str(shim),
            "-Wl,--no-as-needed",
            f"-L{real}",
            "-l:libreal_model.so",
            f"-Wl,-rpath,{real}",
        ],
        check=True,
        capture_output=True,
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
        for info in inner.infolist():
            z.writestr(info, shim.read_bytes() if info is library else inner.read(info))
    members[package] = out.getvalue()
    if not keep_samples:
        graph = manifest["modules"][0]["graphs"][0]
        for prefix in graph["samples"]:
            members.pop(prefix + ".json")
            members.pop(prefix + ".safetensors")
        graph["samples"] = []
    return write_archive(folder / f"{behaviour.replace(' ', '-')}.ait", manifest, members)


LOAD_AND_CALL = textwrap.dedent(
    """
    import sys, torch
    import aitune.torch as ait
    from aitune.torch.config import config
    config.cache_dir = sys.argv[2]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
    try:
        loaded = ait.load(model, sys.argv[1])
    except Exception as e:
        print("REFUSED", type(e).__name__, str(e).replace("\\n", " "), flush=True)
        sys.exit(0)
    print("LOADED", flush=True)
    with torch.no_grad():
        loaded(torch.randn(2, 6))
    print("SERVED", flush=True)
    """
)


def _load_in_child(path: Path, cache: Path, timeout_s: float, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", LOAD_AND_CALL, str(path), str(cache)],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout_s,
        env=dict(os.environ, **env),
    )
    return r, time.monotonic() - start


@pytest.mark.parametrize("keep_samples", [True, False], ids=["stored-sample", "no-sample"])
def test_a_package_that_crashes_on_its_first_call_is_refused_at_load(aot_ckpt, tmp_path, keep_samples):
    """Before: ait.load succeeded and the first call killed the process (SIGSEGV)."""
    bad = _damaged(aot_ckpt, tmp_path, "crash on first call", keep_samples)
    r, _ = _load_in_child(bad, tmp_path / "cache", timeout_s=300)
    assert r.returncode == 0, f"the loading process died ({r.returncode}): {r.stdout[-500:]} {r.stderr[-500:]}"
    assert "REFUSED CorruptCheckpointError" in r.stdout, r.stdout
    assert "its first call crashes (SIGSEGV) in a check process" in r.stdout, r.stdout


def test_a_package_that_hangs_on_its_first_call_is_refused_in_bounded_time(aot_ckpt, tmp_path):
    """Before: ait.load succeeded and the first call never returned."""
    bad = _damaged(aot_ckpt, tmp_path, "hang on first call")
    r, seconds = _load_in_child(bad, tmp_path / "cache", timeout_s=240, AITUNE_AOTI_LOAD_CHECK_TIMEOUT_S="10")
    assert "REFUSED CorruptCheckpointError" in r.stdout, (r.stdout, r.stderr[-500:])
    assert "its first call did not finish within 10 s" in r.stdout, r.stdout
    assert seconds < 120, seconds


def test_a_package_that_hangs_on_load_is_refused_after_the_configured_timeout(aot_ckpt, tmp_path):
    """Before: ait.load waited for its check child for 600 s."""
    bad = _damaged(aot_ckpt, tmp_path, "hang on load")
    r, seconds = _load_in_child(bad, tmp_path / "cache", timeout_s=240, AITUNE_AOTI_LOAD_CHECK_TIMEOUT_S="10")
    assert "REFUSED CorruptCheckpointError" in r.stdout, (r.stdout, r.stderr[-500:])
    assert "loading it did not finish within 10 s" in r.stdout, r.stdout
    assert seconds < 120, seconds


def test_a_package_that_crashes_on_load_is_refused(aot_ckpt, tmp_path):
    bad = _damaged(aot_ckpt, tmp_path, "crash on load")
    with pytest.raises(errors.CorruptCheckpointError, match=r"loading it crashes \(SIGSEGV\) in a check process"):
        ait.load(_mlp(), bad)


def test_a_package_that_passed_is_not_checked_again(aot_ckpt):
    x = torch.randn(2, 6)
    first = ait.load(_mlp(), aot_ckpt)
    [marker] = list((Path(config.cache_dir) / "checkpoints").rglob("model.pt2.probed--1"))
    assert marker.read_text().endswith("\nfirst call")
    checked = marker.stat().st_mtime_ns
    again = ait.load(_mlp(), aot_ckpt)
    with torch.no_grad():
        assert torch.equal(first(x), again(x))
    assert marker.stat().st_mtime_ns == checked, "the passed check was remembered"


def test_a_freshly_built_package_that_crashes_on_its_first_call_fails_its_build(aot_ckpt, tmp_path):
    """The same check runs when a package is built while tuning (a RuntimeError: the candidate
    fails and the strategy tries the next one)."""
    from aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend import probe_package_load
    from aitune.torch.checkpoint.format import OpenedCheckpoint
    from aitune.torch.checkpoint.graphs import graph_from_native
    from aitune.torch.graph.signature import KIND_NAMES

    bad = _damaged(aot_ckpt, tmp_path, "crash on first call")
    ckpt = OpenedCheckpoint(bad, "fast")
    entry = ckpt.manifest.modules[0]
    kinds = {name: number for number, name in KIND_NAMES.items()}
    params = [(p.name, kinds[p.kind], p.has_default) for p in entry.forward_signature]
    graph = graph_from_native(entry.graphs[0], params, None)
    package = next(p for p in ckpt.extract_all().rglob("model.pt2"))
    with pytest.raises(RuntimeError, match=r"its first call crashes \(SIGSEGV\)") as info:
        probe_package_load(package, -1, graph=graph)
    assert not isinstance(info.value, errors.CorruptCheckpointError)


def test_the_timeout_is_a_positive_number_of_seconds(monkeypatch):
    with pytest.raises(ValueError, match="aoti_load_check_timeout_s must be a number of seconds > 0, got 0"):
        config.aoti_load_check_timeout_s = 0
    config.aoti_load_check_timeout_s = 2.5
    assert config.aoti_load_check_timeout_s == 2.5
    monkeypatch.setenv("AITUNE_AOTI_LOAD_CHECK_TIMEOUT_S", "soon")
    with pytest.raises(errors.AITuneUserInputError, match="AITUNE_AOTI_LOAD_CHECK_TIMEOUT_S must be a number"):
        config.reset_to_defaults()
    monkeypatch.setenv("AITUNE_AOTI_LOAD_CHECK_TIMEOUT_S", "30")
    config.reset_to_defaults()
    assert config.aoti_load_check_timeout_s == 30.0
