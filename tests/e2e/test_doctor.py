"""`python -m aitune doctor` and the C++ CLI `aitune` (docs/reference/native.md#command-line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import aitune
from support import aitune_cli


def _env() -> dict:
    """The current environment, with this process's aitune importable in the child."""
    env = os.environ.copy()
    package_root = str(Path(aitune.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH", "")] if p)
    return env


def _run(cmd, timeout=120):
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)


def _cli() -> str:
    return aitune_cli()


def _release(version: str) -> str:
    return version.split("+")[0]


@pytest.fixture(scope="module")
def python_doctor_json():
    result = _run([sys.executable, "-m", "aitune", "doctor", "--json"])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_python_doctor_json_native_part(python_doctor_json):
    native = python_doctor_json["native"]
    assert _release(native["torch_version"]) == _release(torch.__version__)
    assert isinstance(native["gpus"], list)
    if not torch.cuda.is_available():
        assert native["gpus"] == []


def test_python_doctor_json_python_part(python_doctor_json):
    python = python_doctor_json["python"]
    assert _release(python["packages"]["torch"]) == _release(torch.__version__)
    assert python["backends"]["TorchEagerBackend"] == "available"
    assert python["torch_cuda_available"] == torch.cuda.is_available()
    # Whether torch's compiler modules have bytecode: the same state this process sees.
    from aitune.torch.utils.bytecode import bytecode_state

    assert python["bytecode"]["missing"] == list(bytecode_state().missing)
    assert python["bytecode"]["hint"] == bytecode_state().hint()


def _torchao_version():
    import importlib.metadata

    try:
        return importlib.metadata.version("torchao")
    except importlib.metadata.PackageNotFoundError:
        return None


def test_python_doctor_reports_torchao_and_its_backend(python_doctor_json):
    python = python_doctor_json["python"]
    version = _torchao_version()
    assert python["packages"]["torchao"] == version
    state = python["backends"]["TorchAOBackend"]
    if version is None:
        assert (
            state == "unavailable: torchao is not installed. Please install `torchao` (pip install 'aitune[torchao]')."
        )
    else:
        assert state == "available"


def test_python_doctor_text():
    result = _run([sys.executable, "-m", "aitune", "doctor"])
    assert result.returncode == 0, result.stderr
    assert "TorchEagerBackend: available" in result.stdout
    assert "torch:" in result.stdout


def test_python_doctor_rejects_unknown_command():
    result = _run([sys.executable, "-m", "aitune", "nonsense"])
    assert result.returncode == 2


def test_cli_doctor_json():
    result = _run([_cli(), "doctor", "--json"], timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["torch_version"] == _release(torch.__version__)
    assert isinstance(report["gpus"], list)
    assert report["aitune_version"]


def test_cli_doctor_reports_the_torchao_package_of_its_environment():
    """The CLI looks beside the libtorch it runs on and in the environment whose bin/ holds it."""
    result = _run([_cli(), "doctor", "--json"], timeout=60)
    assert result.returncode == 0, result.stderr
    [torchao] = json.loads(result.stdout)["python_packages"]
    assert torchao["name"] == "TorchAO"
    cli_env = Path(_cli()).resolve().parent.parent
    ours = Path(sys.prefix).resolve()
    if torchao["found"]:
        assert torchao["version"] and "runs from Python only" in torchao["how"]
        assert (Path(torchao["path"]) / "__init__.py").is_file()
    elif cli_env == ours:  # the CLI of this very environment: it must see what Python sees
        assert _torchao_version() is None, torchao["how"]
    text = _run([_cli(), "doctor"], timeout=60).stdout
    assert "TorchAO: " + ("installed" if torchao["found"] else "not found") in text


def test_cli_doctor_text():
    result = _run([_cli(), "doctor"], timeout=60)
    assert result.returncode == 0, result.stderr
    assert _release(torch.__version__) in result.stdout


@pytest.mark.parametrize("args", [["doctor", "--bogus"], ["nonsense"], []])
def test_cli_usage_errors_exit_2(args):
    result = _run([_cli(), *args], timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip()  # a usage message, not silence


def test_python_crash_report_chains_to_faulthandler(tmp_path):
    """AITUNE_CRASH_REPORT=1: a segmentation fault in native code prints aitune's native report,
    then faulthandler's Python frames, and the process still dies by the signal."""
    import signal

    code = "import faulthandler, ctypes; faulthandler.enable(); import aitune.torch; ctypes.string_at(0)"
    env = _env()
    env["AITUNE_CRASH_REPORT"] = "1"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGSEGV
    assert "aitune: fatal signal 11" in r.stderr and "fault address (nil)" in r.stderr
    assert r.stderr.index("aitune: fatal signal") < r.stderr.index("Fatal Python error: Segmentation fault")
