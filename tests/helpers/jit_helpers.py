"""Shared pieces of the JIT tests: tiny models whose `compute` is the pure math (what the fake
backend serves), a fake backend that fails for chosen classes, and a fixture body that leaves no
patch, head or setting behind."""

from __future__ import annotations

import atexit
import dataclasses
from pathlib import Path
from typing import Any

import torch
from fake_backend import FakeBackend, FakeBackendConfig

import aitune.torch as ait
from aitune.torch.jit import patcher, telemetry
from aitune.torch.jit.config import config as jit_config
from aitune.torch.jit.exit_report import at_exit
from aitune.torch.jit.state import runtime


class Block(torch.nn.Module):
    def __init__(self, features: int = 4) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(features, features)
        self.act = torch.nn.ReLU()

    def compute(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.lin(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.compute(x)


class Net(torch.nn.Module):
    def __init__(self, features: int = 4) -> None:
        super().__init__()
        self.a = Block(features)
        self.b = Block(features)

    def compute(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.compute(x) * scale


@dataclasses.dataclass
class SelectiveFakeConfig(FakeBackendConfig):
    fail_for: tuple[str, ...] = ()  # class names whose build fails


class SelectiveFakeBackend(FakeBackend):
    """FakeBackend whose build fails for the module classes named in `fail_for`."""

    config_class = SelectiveFakeConfig

    def _build(
        self, module: torch.nn.Module, graph_spec: Any, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        if type(module).__name__ in self.config.fail_for:
            raise RuntimeError(f"fake build failure for {type(module).__name__}")
        super()._build(module, graph_spec, data, device, cache_dir)


def fake_strategy(fail_for: tuple[str, ...] = ()) -> Any:
    return ait.FirstWinsStrategy(
        [SelectiveFakeBackend(SelectiveFakeConfig(fail_for=fail_for))]
    ).enable_performance_validation(False)


def reset_jit() -> None:
    """No patch of nn.Module.__init__, no heads, default jit_config, no exit hook."""
    patcher._uninstall()
    patcher._patcher.global_enabled = False
    patcher._patcher.scoped_depth = 0
    if patcher._patcher.atexit_registered:
        atexit.unregister(at_exit)
        patcher._patcher.atexit_registered = False
    runtime.reset()
    telemetry.reset()
    jit_config.reset_to_defaults()


# -- child processes started with AUTOWRAPT_BOOTSTRAP ---------------------------------------------
BOOTSTRAP_GROUP = "aitune_enable_jit_tuning"


def _entry_point_dir(folder: Path) -> Path | None:
    import pytest

    """A .dist-info holding pyproject's `aitune_enable_jit_tuning` entry point, for a child run
    from the source tree (an installed aitune declares it itself); None when none is needed."""
    import importlib.metadata

    import aitune

    if any(
        ep.value == "aitune.jit_bootstrap:enable_jit_tuning"
        for ep in importlib.metadata.entry_points(group=BOOTSTRAP_GROUP)
    ):
        return None
    try:
        import tomllib
    except ImportError:  # Python 3.10
        pytest.skip("aitune is not installed and Python < 3.11 has no tomllib to read pyproject's entry point")
    pyproject = Path(aitune.__file__).resolve().parents[2] / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip(
            f"the installed aitune declares no `{BOOTSTRAP_GROUP}` entry point (reinstall it) and there is "
            f"no source tree pyproject.toml at {pyproject}"
        )
    points = tomllib.loads(pyproject.read_text())["project"]["entry-points"][BOOTSTRAP_GROUP]
    info = folder / "aitune_jit_tests-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aitune-jit-tests\nVersion: 0.0\n")
    lines = "".join(f"{k} = {v}\n" for k, v in points.items())
    (info / "entry_points.txt").write_text(f"[{BOOTSTRAP_GROUP}]\n{lines}")
    return folder


def run_jit_child(
    script: str, tmp_path: Path, *args: str, bootstrap: bool = True, timeout: int = 300, **env: str
) -> tuple[str, Path]:
    """Runs `script` in a fresh interpreter (with AUTOWRAPT_BOOTSTRAP unless `bootstrap` is False),
    importing the same aitune as this process, with caches and reports under `tmp_path`.
    Returns (log, telemetry JSON path)."""
    import os
    import subprocess
    import sys

    import pytest

    import aitune

    try:
        import autowrapt  # noqa: F401
    except ImportError:
        pytest.skip("autowrapt is not installed (pip install autowrapt): AUTOWRAPT_BOOTSTRAP cannot start JIT tuning")
    paths = [str(Path(aitune.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    entry = _entry_point_dir(tmp_path / "entry_point") if bootstrap else None
    if entry is not None:
        paths.insert(0, str(entry))
    report = tmp_path / "report.json"
    full = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in paths if p),
        AITUNE_CACHE_DIR=str(tmp_path / "cache"),
        AITUNE_JIT_CACHE_DIR=str(tmp_path / "jit"),
        AITUNE_TUNING_DATA_PATH=str(report),
        **env,
    )
    full.pop("AITUNE_TUNING_REPORT_PATH", None)
    if bootstrap:
        full["AUTOWRAPT_BOOTSTRAP"] = BOOTSTRAP_GROUP
    else:
        full.pop("AUTOWRAPT_BOOTSTRAP", None)
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
        errors="replace",
        cwd=tmp_path,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    return log, report
