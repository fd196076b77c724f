"""benchmarks/carry_wheels.sh: a wheel larger than one device call carries travels in parts over
consecutive calls and is joined on the GPU machine only when every part arrived and the whole
wheel's SHA-256 matches (docs/serving.md, "On a machine without a package index")."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "carry_wheels.sh"
BIG = "big_pkg-1.0-cp312-abi3-manylinux_2_28_x86_64.whl"
SMALL = "small_pkg-1.0-py3-none-any.whl"

pytestmark = pytest.mark.skipif(shutil.which("split") is None, reason="needs coreutils' split")


def _repo(root: Path) -> Path:
    (root / "benchmarks").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "benchmarks" / SCRIPT.name)
    return root


def _run(repo: Path, *args: str, keep: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, CARRY_PART_MB="1", CARRY_KEEP_DIR=str(keep))
    return subprocess.run(
        ["bash", "benchmarks/carry_wheels.sh", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )


def _send(here: Path, there: Path) -> None:
    """What one device call does with the carry: the machine's .gpu-carry is this call's alone."""
    shutil.rmtree(there / ".gpu-carry", ignore_errors=True)
    shutil.copytree(here / ".gpu-carry", there / ".gpu-carry")


@pytest.fixture
def stock(tmp_path):
    here = _repo(tmp_path / "here")
    there = _repo(tmp_path / "there")
    (here / ".gpu-carry-stock").mkdir()
    big = os.urandom(2 * 1024 * 1024 + 12345)  # 3 parts of 1 MiB
    (here / ".gpu-carry-stock" / BIG).write_bytes(big)
    (here / ".gpu-carry-stock" / SMALL).write_bytes(b"small wheel")
    r = _run(here, "split", keep=tmp_path / "keep")
    assert r.returncode == 0, r.stderr
    assert "in 3 parts" in r.stdout
    return here, there, big, tmp_path / "keep"


def test_a_large_wheel_is_joined_after_its_last_part(stock):
    here, there, big, keep = stock
    for k in (1, 2, 3):
        assert _run(here, "stage", str(k), keep=keep).returncode == 0
        carried = sorted(p.name for p in (here / ".gpu-carry").rglob("*") if p.is_file())
        assert f"{BIG}.part-0{k - 1}" in carried and not any(
            f".part-0{j}" in n for n in carried for j in {0, 1, 2} - {k - 1}
        )
        assert (SMALL in carried) == (k == 1)  # small wheels travel whole, with the first call
        _send(here, there)
        r = _run(there, "assemble", keep=keep)
        assert r.returncode == 0, r.stderr
        joined = there / ".gpu-carry" / "wheels" / BIG
        if k < 3:
            assert f"has {k} of 3" in r.stdout and not joined.exists()
        else:
            assert "joined from 3 parts" in r.stdout
            assert joined.read_bytes() == big


def test_a_damaged_part_is_refused(stock):
    here, there, _, keep = stock
    for k in (1, 2, 3):
        _run(here, "stage", str(k), keep=keep)
        _send(here, there)
        if k == 2:
            part = keep / f"{BIG}.part-00"
            data = bytearray(part.read_bytes())
            data[100] ^= 0xFF
            part.write_bytes(bytes(data))
        r = _run(there, "assemble", keep=keep)
    assert r.returncode == 1
    assert "another SHA-256" in r.stderr
    assert not (there / ".gpu-carry" / "wheels" / BIG).exists()
