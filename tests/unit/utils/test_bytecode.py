"""The bytecode check (aitune/torch/utils/bytecode.py; docs/reference/configuration.md, Bytecode):
on a package folder of its own, with Python's real bytecode paths (sys.pycache_prefix honoured)
and real compiles, and the one warning ait.tune logs."""

from __future__ import annotations

import py_compile
import sys
from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune.torch import tuning
from aitune.torch.utils.bytecode import PROBES, bytecode_state


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    for relative in PROBES:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("x = 1\n")
    return root


@pytest.fixture
def prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Bytecode goes under a prefix of this test's own, as PYTHONPYCACHEPREFIX would put it."""
    folder = tmp_path / "pycache"
    monkeypatch.setattr(sys, "pycache_prefix", str(folder))
    return folder


def test_missing_bytecode_that_this_process_would_write_is_no_problem(package, prefix, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    state = bytecode_state(package)
    assert state.missing == PROBES and state.writes
    assert state.hint() is None


def test_no_bytecode_and_no_writing_gives_the_hint(package, prefix, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    state = bytecode_state(package)
    assert state.recompiles_every_process
    hint = state.hint()
    assert "PYTHONDONTWRITEBYTECODE is set" in hint and "PYTHONPYCACHEPREFIX" in hint
    assert state.to_dict()["missing"] == list(PROBES) and state.to_dict()["dont_write_bytecode"] is True


def test_compiled_bytecode_under_the_prefix_is_found(package, prefix, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    for relative in PROBES:
        py_compile.compile(str(package / relative), doraise=True)  # writes where the import system looks
    assert any(prefix.rglob("*.pyc"))
    state = bytecode_state(package)
    assert state.missing == () and state.hint() is None


def test_a_bytecode_folder_that_cannot_be_created_counts_as_not_writing(package, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(sys, "pycache_prefix", str(blocker / "pycache"))  # a folder under a file: never created
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    state = bytecode_state(package)
    assert state.missing == PROBES and not state.writes
    assert "its bytecode folder is not writable by this user" in state.hint()


def test_ait_tune_warns_once_when_every_process_recompiles(monkeypatch, aitune_log, tmp_path):
    # torch's own folder, with the prefix pointing at an empty place and writing off: the real
    # state of a container with PYTHONDONTWRITEBYTECODE and a fresh PYTHONPYCACHEPREFIX.
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(tuning, "_BYTECODE_CHECKED", [])
    for _ in range(2):
        ait.tune(lambda x: x, [torch.zeros(2)], device="cpu", dry_run=True)
    assert aitune_log.text.count("no bytecode for torch's compiler modules") == 1
