"""The conformance tier: the real TensorRT and Torch-TensorRT wheels judge aitune's glue and the
fakes the unit tests use (see README.md here). The fakes live in tests/fakes.

It judges the checkout: the TensorRT glue is read from python/aitune, and the tests that import
aitune fail when the installed package's Python files of the judged backends differ from the
checkout's. Where the wheels cannot be fetched (no registry, no `cc`/`nm` for the stand-ins) the
tier skips, except in CI (`CI` set) or with AITUNE_CONFORMANCE_REQUIRED=1, where it fails:
pre-fetch the wheels with `python tests/conformance/real_wheels.py` (README.md, "Offline")."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fakes"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_stubs import StubsUnavailable  # noqa: E402
from real_wheels import TENSORRT_VERSIONS, WheelMissing, WheelUnavailable  # noqa: E402

REQUIRED_ENV = "AITUNE_CONFORMANCE_REQUIRED"
CHECKOUT = Path(__file__).resolve().parents[2] / "python" / "aitune"
# The checkout folders (and files) whose installed copy the tier judges.
JUDGED = (
    "torch/backend/tensorrt",
    "torch/backend/torch_tensorrt_jit",
    "torch/backend/torch_tensorrt_aot",
    "torch/backend/common/torch_tensorrt_config.py",
)


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


def required() -> str | None:
    """Why the tier may not skip (CI, or AITUNE_CONFORMANCE_REQUIRED), or None."""
    if REQUIRED_ENV in os.environ:
        return f"{REQUIRED_ENV}={os.environ[REQUIRED_ENV]}" if _flag(os.environ[REQUIRED_ENV]) else None
    return f"CI={os.environ['CI']}" if _flag(os.environ.get("CI")) else None


def real_or_skip(make):
    """make(): skips with the reason when the registry or the toolchain is missing, unless the tier is
    required (then it fails); a wheel the registry does not have fails (pytest.fail), so the tier
    never passes silently."""
    try:
        return make()
    except (WheelUnavailable, StubsUnavailable) as e:
        why = required()
        if why:
            pytest.fail(
                f"conformance tier required ({why}) but not run: {e}. Pre-fetch its wheels where the registry "
                "is reachable with `python tests/conformance/real_wheels.py` (tests/conformance/README.md)"
            )
        pytest.skip(f"conformance tier not run: {e}")
    except WheelMissing as e:
        pytest.fail(str(e))


def stale_installed_files(checkout: Path, installed: Path) -> list[str]:
    """The judged .py files whose installed copy differs from (or lacks) the checkout's."""
    stale = []
    for judged in JUDGED:
        source = checkout / judged
        files = [source] if source.suffix == ".py" else sorted(source.glob("*.py"))
        for path in files:
            copy = installed / path.relative_to(checkout)
            if not copy.is_file() or copy.read_bytes() != path.read_bytes():
                stale.append(str(path.relative_to(checkout)))
    return stale


@pytest.fixture(scope="session")
def installed_is_checkout() -> None:
    """For the tests that import aitune: the installed package must be the checkout's code."""
    import aitune

    installed = Path(aitune.__file__).resolve().parent
    if not CHECKOUT.is_dir() or installed == CHECKOUT.resolve():
        return
    stale = stale_installed_files(CHECKOUT, installed)
    if stale:
        pytest.fail(
            f"the installed aitune ({installed}) is not the checkout's code in {stale}; the tier judges the "
            "checkout: reinstall it (pip install . / ./run test) or sync the Python files"
        )


@pytest.fixture(scope="session")
def tensorrt_surfaces() -> dict[str, dict]:
    """{version: surface} of every TensorRT release aitune supports (real_wheels.TENSORRT_VERSIONS)."""
    from extract_tensorrt_surface import surface

    return real_or_skip(lambda: {version: surface(version) for version in TENSORRT_VERSIONS})
