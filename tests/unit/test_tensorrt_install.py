"""Which TensorRT is installed comes from `tensorrt.__version__`: `pip install tensorrt-cu13` installs
the module from distributions named tensorrt-cu13(-bindings, -libs), none named "tensorrt", so the
checkpoint fingerprint and `python -m aitune doctor` must not ask the package metadata for
"tensorrt" (docs/guide.md, Checking the machine; Saving and loading)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import fake_tensorrt
import pytest

import aitune
from aitune.torch.checkpoint.fingerprint import current_fingerprint, mismatches


@pytest.fixture
def tensorrt_cu13(monkeypatch):
    """A `tensorrt` module as `pip install tensorrt-cu13==11.4.0.106` gives it: no "tensorrt" distribution."""
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("tensorrt")
    monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt.as_module())


def test_the_fingerprint_records_the_module_version(tensorrt_cu13):
    assert current_fingerprint()["tensorrt"] == "11.4.0.106"


def test_a_plan_from_another_tensorrt_is_flagged(tensorrt_cu13):
    saved = dict(current_fingerprint(), tensorrt="10.15.1.29")
    assert mismatches(saved, current_fingerprint(), ["tensorrt"], "TensorRTBackend of module 'm' graph '0'") == [
        ("tensorrt", "10.15.1.29", "11.4.0.106", "TensorRTBackend of module 'm' graph '0'")
    ]


def test_without_tensorrt_the_fingerprint_says_none(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # `import tensorrt` fails
    assert current_fingerprint()["tensorrt"] is None


def test_python_doctor_names_the_tensorrt_it_found_and_where(tmp_path):
    package = tmp_path / "site" / "tensorrt"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "11.4.0.106"\n')  # like tensorrt-cu13's, no metadata
    env = dict(os.environ)
    root = str(Path(aitune.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [root, str(tmp_path / "site"), env.get("PYTHONPATH", "")] if p)
    result = subprocess.run(
        [sys.executable, "-m", "aitune", "doctor", "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    python = json.loads(result.stdout)["python"]
    assert python["packages"]["tensorrt"] == "11.4.0.106"
    assert python["tensorrt"]["major"] == 11 and python["tensorrt"]["module"] == str(package)
    text = subprocess.run(
        [sys.executable, "-m", "aitune", "doctor"], env=env, capture_output=True, text=True, timeout=300
    )
    assert f"TensorRT 11.x (11.4.0.106) from {package}" in text.stdout, text.stdout
