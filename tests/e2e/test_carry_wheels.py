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


def _wheel(path: Path, files: dict[str, bytes]) -> None:
    """A wheel whose RECORD lists every file with its SHA-256, as pip writes it."""
    import base64
    import hashlib
    import zipfile

    record = "small_pkg-1.0.dist-info/RECORD"
    lines = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(data)}")
    lines.append(f"{record},,")
    with zipfile.ZipFile(path, "w") as whl:
        for name, data in files.items():
            whl.writestr(name, data)
        whl.writestr(record, "\n".join(lines) + "\n")


@pytest.fixture
def packed(tmp_path):
    here = _repo(tmp_path / "here")
    there = _repo(tmp_path / "there")
    stock = here / ".gpu-carry-stock"
    stock.mkdir()
    files = {"big_pkg/lib.so": os.urandom(1024 * 1024 + 7) * 2, "big_pkg/__init__.py": b"x = 1\n"}
    _wheel(stock / BIG, files)
    (stock / SMALL).write_bytes(b"small wheel")
    r = _run(here, "pack", keep=tmp_path / "keep")
    assert r.returncode == 0, r.stderr
    assert f"{BIG}:" in r.stdout and "as tar.xz" in r.stdout
    assert _run(here, "stage", "packed", keep=tmp_path / "keep").returncode == 0
    carried = sorted(p.relative_to(here / ".gpu-carry").as_posix() for p in (here / ".gpu-carry").rglob("*"))
    assert f"wheels/{SMALL}" in carried and f"packed/{BIG}.tar.xz" in carried
    assert not any(name.startswith(f"wheels/{BIG}") for name in carried)  # the large wheel goes packed only
    return here, there, files, tmp_path / "keep"


@pytest.mark.skipif(shutil.which("xz") is None, reason="needs xz")
def test_a_packed_wheel_is_rebuilt_in_one_call_with_its_recorded_files(packed):
    import zipfile

    here, there, files, keep = packed
    _send(here, there)
    r = _run(there, "assemble", keep=keep)
    assert r.returncode == 0, r.stderr
    assert "rebuilt from tar.xz" in r.stdout
    with zipfile.ZipFile(there / ".gpu-carry" / "wheels" / BIG) as whl:
        assert {name: whl.read(name) for name in files} == files


@pytest.mark.skipif(shutil.which("xz") is None, reason="needs xz")
def test_a_packed_wheel_whose_files_differ_from_its_record_is_refused(packed, tmp_path):
    import subprocess as sp

    here, there, _, keep = packed
    _send(here, there)
    # Repack with one file changed, and give the archive a matching SHA-256: only RECORD can tell.
    archive = there / ".gpu-carry" / "packed" / f"{BIG}.tar.xz"
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    sp.run(["tar", "-C", str(unpacked), "-xJf", str(archive)], check=True)
    (unpacked / "big_pkg" / "__init__.py").write_bytes(b"x = 2\n")
    sp.run(f"tar -C {unpacked} -cf - . | xz > {archive}", shell=True, check=True)
    digest = sp.run(["sha256sum", str(archive)], capture_output=True, text=True, check=True).stdout.split()[0]
    (there / ".gpu-carry" / "packed" / f"{BIG}.sha256").write_text(f"{digest} {BIG}\n")
    r = _run(there, "assemble", keep=keep)
    assert r.returncode == 1
    assert "big_pkg/__init__.py: content differs" in r.stderr
    assert not (there / ".gpu-carry" / "wheels" / BIG).exists()
