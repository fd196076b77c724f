"""The real TensorRT and Torch-TensorRT wheels that judge aitune's glue and the test fakes.

They are fetched once with ``pip download --no-deps`` (about 6 MB) into a cache outside the clone,
``~/.cache/aitune/wheels`` (or ``$AITUNE_WHEEL_CACHE``), and unpacked next to it. Nothing is
installed: the TensorRT bindings are imported from the unpacked wheel in a child process
(see native_stubs.py) and Torch-TensorRT's Python code from its unpacked wheel (see
torch_tensorrt_sandbox.py).

When the registry cannot be reached, fetch() raises WheelUnavailable and the tests skip with
that reason (fail in CI: conftest.py); when the registry answers but the pinned wheel is missing,
it raises WheelMissing and the tests fail: a renamed or yanked wheel must not turn the tier
silently off. `python tests/conformance/real_wheels.py` pre-fetches every wheel (`--check`: is the
cache complete?).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Iterator

# TensorRT 11 is the newest release; torch-tensorrt 2.11 (the release paired with torch 2.11)
# requires tensorrt >= 10.15.1, < 10.16, so 10.15 is the 10.x release aitune meets through it.
TENSORRT_BINDINGS = "tensorrt-cu13-bindings"
TENSORRT_VERSIONS = ("11.4.0.106", "10.15.1.29")
TORCH_TENSORRT = "torch-tensorrt"
TORCH_TENSORRT_VERSION = "2.11.0"
TORCH_TENSORRT_TENSORRT_VERSION = "10.15.1.29"


class WheelUnavailable(RuntimeError):
    """The registry could not be reached: the tier skips with this reason."""


class WheelMissing(RuntimeError):
    """The registry answered but has no such wheel for this interpreter: the tier fails."""


def cache_dir() -> Path:
    return Path(os.environ.get("AITUNE_WHEEL_CACHE") or Path.home() / ".cache" / "aitune" / "wheels")


def _python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _platform_tag() -> str:
    return f"manylinux_2_28_{platform.machine()}"


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """Several clones (and CI jobs) share the cache: one download or unpack at a time."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _find(dist: str, version: str) -> Path | None:
    stem = dist.replace("-", "_") + "-" + version + "-"
    interpreter = "cp" + _python_tag().replace(".", "")
    for wheel in sorted(cache_dir().glob(stem + "*.whl")):
        if interpreter in wheel.name and platform.machine() in wheel.name:
            return wheel
    return None


def _registry_answers(dist: str) -> tuple[bool, str]:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", dist], capture_output=True, text=True, timeout=120
    )
    return result.returncode == 0, (result.stdout + result.stderr).strip()


_UNREACHABLE: dict[tuple[str, str], WheelUnavailable] = {}  # asked once per process: pip may wait long


def fetch(dist: str, version: str) -> Path:
    """The wheel of `dist`==`version` for this interpreter, downloaded once into cache_dir()."""
    if (dist, version) in _UNREACHABLE:
        raise _UNREACHABLE[(dist, version)]
    try:
        return _fetch(dist, version)
    except WheelUnavailable as e:
        _UNREACHABLE[(dist, version)] = e
        raise


def _fetch(dist: str, version: str) -> Path:
    with _locked(f"{dist}-{version}"):
        found = _find(dist, version)
        if found is not None:
            return found
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                _python_tag(),
                "--platform",
                _platform_tag(),
                "-d",
                tmp,
                f"{dist}=={version}",
            ]
            try:
                result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            except subprocess.TimeoutExpired:
                raise WheelUnavailable(f"`pip download {dist}=={version}` did not finish in 600 s") from None
            wheels = list(Path(tmp).glob("*.whl"))
            if result.returncode != 0 or len(wheels) != 1:
                output = (result.stdout + result.stderr).strip().splitlines()
                tail = " | ".join(output[-3:]) or f"exit status {result.returncode}"
                answers, index_output = _registry_answers(dist)
                if answers:
                    raise WheelMissing(
                        f"the registry lists {dist} ({index_output.splitlines()[0]}) but `pip download "
                        f"{dist}=={version}` for Python {_python_tag()} {_platform_tag()} "
                        f"failed: {tail}"
                    )
                raise WheelUnavailable(
                    f"the package registry is unreachable: `pip download {dist}=={version}` failed: {tail}"
                )
            target = cache_dir() / wheels[0].name
            shutil.move(str(wheels[0]), target)
            return target


def unpacked(dist: str, version: str) -> Path:
    """The wheel's files, unpacked once next to it (a folder that goes on PYTHONPATH)."""
    wheel = fetch(dist, version)
    target = cache_dir() / "unpacked" / wheel.stem
    with _locked(f"unpack-{wheel.stem}"):
        if not (target / ".complete").is_file():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(target)
            (target / ".complete").touch()
    return target


def prefetch() -> list[Path]:
    """Every wheel the tier needs, fetched (when not cached) and unpacked: what CI runs where the
    registry is reachable, before the tests (or once, to fill a cache it then mounts offline)."""
    wanted = [(TENSORRT_BINDINGS, version) for version in TENSORRT_VERSIONS] + [
        (TORCH_TENSORRT, TORCH_TENSORRT_VERSION)
    ]
    return [unpacked(dist, version) for dist, version in wanted]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description="Fetch the conformance tier's wheels into its cache (AITUNE_WHEEL_CACHE or ~/.cache/aitune/wheels)."
    )
    parser.add_argument("--check", action="store_true", help="only report whether every wheel is cached (no network)")
    args = parser.parse_args(argv)
    if args.check:
        wanted = [(TENSORRT_BINDINGS, v) for v in TENSORRT_VERSIONS] + [(TORCH_TENSORRT, TORCH_TENSORRT_VERSION)]
        missing = [f"{dist}=={version}" for dist, version in wanted if _find(dist, version) is None]
        print(f"cache {cache_dir()}: " + (f"missing {', '.join(missing)}" if missing else "complete"))
        return 1 if missing else 0
    try:
        for folder in prefetch():
            print(folder)
    except (WheelUnavailable, WheelMissing) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
