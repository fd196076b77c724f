"""Results reuse across processes (docs/reference/tuning.md#reusing-results): a second process loads the stored result
instead of tuning; changed weights or strategy config miss; the switch disables it; a corrupt file re-tunes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

import aitune


SCRIPT = r"""
import os, sys, logging, torch
import aitune.torch as ait
from aitune.torch.backend import TorchEagerBackend, TorchInductorAotBackend
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
if os.environ.get("T_WEIGHT"):
    with torch.no_grad():
        model[0].weight[0, 0] += 1.0
backend = TorchInductorAotBackend() if os.environ.get("T_BACKEND") == "aot" else TorchEagerBackend()
strategy = ait.OneBackendStrategy(backend, min_speedup_threshold_percent=float(os.environ.get("T_SPEEDUP", "1.0")))
strategy.enable_performance_validation(False).enable_find_max_batch_size(False)
m = ait.Module(model, "mlp", strategy=strategy)
torch.manual_seed(1)
ait.tune(m, [torch.randn(6) for _ in range(3)], batch_sizes=[1, 2], device="cpu")
x = torch.arange(12, dtype=torch.float32).reshape(2, 6) / 10
with torch.no_grad():
    torch.save(m(x), sys.argv[1])
"""


def _run(cache: Path, out: Path, **env: str) -> str:
    # The child imports the same aitune as this process (the installed package under ./run test,
    # the source tree when PYTHONPATH points there).
    package_root = str(Path(aitune.__file__).resolve().parents[1])
    pythonpath = os.pathsep.join(p for p in [package_root, os.environ.get("PYTHONPATH", "")] if p)
    full = dict(os.environ, PYTHONPATH=pythonpath, AITUNE_CACHE_DIR=str(cache), **env)
    if "AITUNE_REUSE_TUNING_RESULTS" not in env:
        full.pop("AITUNE_REUSE_TUNING_RESULTS", None)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(out)],
        capture_output=True,
        text=True,
        env=full,
        timeout=300,
        errors="replace",
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    return log


def _stored(cache: Path) -> list[Path]:
    return sorted((cache / "results" / "mlp").glob("*.ait"))


def _build_dirs(cache: Path) -> dict[str, float]:
    root = cache / "mlp"
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*") if p.is_dir()} if root.exists() else {}


def test_aot_result_is_reused_by_a_second_process(tmp_path, aoti_loads):
    cache = tmp_path / "cache"
    first = _run(cache, tmp_path / "a.pt", T_BACKEND="aot")
    assert "♻️ Reusing tuning result" not in first
    assert len(_stored(cache)) == 1
    builds = _build_dirs(cache)
    assert builds
    second = _run(cache, tmp_path / "b.pt", T_BACKEND="aot")
    assert "♻️ Reusing tuning result for module `mlp` graph `" in second and "TorchInductorAotBackend" in second
    assert "Executing strategy" not in second
    assert "🔁" not in second  # loaded from the stored package, not built again
    assert _build_dirs(cache) == builds  # no new build folder, none touched
    torch.testing.assert_close(torch.load(tmp_path / "b.pt"), torch.load(tmp_path / "a.pt"))


def test_eager_reuse_misses_and_fallbacks(tmp_path):
    cache = tmp_path / "cache"
    base = _run(cache, tmp_path / "0.pt")
    assert "♻️" not in base and len(_stored(cache)) == 1
    builds = _build_dirs(cache)

    hit = _run(cache, tmp_path / "1.pt")
    assert "♻️ Reusing tuning result for module `mlp`" in hit and "Executing strategy" not in hit
    # A rebuilt backend says so, why, and how long it took.
    assert "🔁 module 'mlp' graph '" in hit and ": building TorchEagerBackend() again from the module" in hit
    assert "compiled code is not stored" in hit and "TorchEagerBackend() built again in " in hit
    # Eager backends rebuild from the live module (in `<graph>/loaded/`), with no tuning build folder.
    after = {k: v for k, v in _build_dirs(cache).items() if "loaded" not in k}
    assert {k: v for k, v in after.items() if "/" in k} == {k: v for k, v in builds.items() if "/" in k}
    torch.testing.assert_close(torch.load(tmp_path / "1.pt"), torch.load(tmp_path / "0.pt"))

    weight = _run(cache, tmp_path / "2.pt", T_WEIGHT="1")  # engines bake weights in: changed weights miss
    assert "♻️" not in weight and "Executing strategy" in weight
    assert len(_stored(cache)) == 2

    config_change = _run(cache, tmp_path / "3.pt", T_SPEEDUP="5.0")
    assert "♻️" not in config_change and len(_stored(cache)) == 3

    disabled = _run(cache, tmp_path / "4.pt", AITUNE_REUSE_TUNING_RESULTS="0")
    assert "♻️" not in disabled and "Executing strategy" in disabled and len(_stored(cache)) == 3

    # Corrupt every stored result: the next run warns, re-tunes and overwrites its file.
    for path in _stored(cache):
        path.write_bytes(b"not a checkpoint")
    corrupt = _run(cache, tmp_path / "5.pt")
    assert "cannot be reused" in corrupt and "Executing strategy" in corrupt and "♻️" not in corrupt
    torch.testing.assert_close(torch.load(tmp_path / "5.pt"), torch.load(tmp_path / "0.pt"))

    again = _run(cache, tmp_path / "6.pt")  # overwritten by the re-tune
    assert "♻️ Reusing tuning result" in again
