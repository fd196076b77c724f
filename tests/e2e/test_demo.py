"""The README's demo (`./run demo` runs `python -m aitune.torch.examples.demo`): the built-in example
model is tuned, the candidates' table and the RESULT line are printed, and a second run, which
reuses the stored result, says why it has no table instead of printing an empty one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import aitune


def _demo(cache: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AITUNE_")}
    env["AITUNE_CACHE_DIR"] = str(cache)
    package_root = str(Path(aitune.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH", "")] if p)
    command = [sys.executable, "-m", "aitune.torch.examples.demo", "--device", "cpu", "--iterations", "20"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def test_the_demo_tunes_then_reuses_and_says_so(tmp_path):
    first = _demo(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    measured = re.findall(r"│ (Torch\w+\(\)) +│ yes ", first.stdout)
    assert "TorchEagerBackend()" in measured and len(measured) >= 2, first.stdout
    result = re.search(r"^RESULT .*backend=(\S+) device=cpu max_abs_diff_vs_eager=(\S+)", first.stdout, re.M)
    assert result and float(result[2]) < 1e-3, first.stdout
    assert "No candidate was measured" not in first.stdout

    second = _demo(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "No candidate was measured in this run: ait.tune reused the result" in second.stdout
    assert "│ backend" not in second.stdout  # no empty table
    again = re.search(r"^RESULT .*backend=(\S+) device=cpu", second.stdout, re.M)
    assert again and again[1] == result[1]
