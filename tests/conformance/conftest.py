"""The conformance tier: the real TensorRT and Torch-TensorRT wheels judge aitune's glue and the
fakes the unit tests use (see README.md here). The fakes live in tests/fakes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fakes"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_stubs import StubsUnavailable  # noqa: E402
from real_wheels import TENSORRT_VERSIONS, WheelMissing, WheelUnavailable  # noqa: E402


def real_or_skip(make):
    """make(): skips with the reason when the registry or the toolchain is missing; a wheel the
    registry does not have fails (pytest.fail), so the tier never passes silently."""
    try:
        return make()
    except (WheelUnavailable, StubsUnavailable) as e:
        pytest.skip(f"conformance tier not run: {e}")
    except WheelMissing as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def tensorrt_surfaces() -> dict[str, dict]:
    """{version: surface} of every TensorRT release aitune supports (real_wheels.TENSORRT_VERSIONS)."""
    from extract_tensorrt_surface import surface

    return real_or_skip(lambda: {version: surface(version) for version in TENSORRT_VERSIONS})
