"""Fixtures of the compatibility tier (AITune's API at AITune's paths)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "helpers"))  # the shared JIT helpers (tests/helpers)

from jit_helpers import reset_jit  # noqa: E402


@pytest.fixture
def jit_clean(tmp_path):
    """JIT tuning on the CPU with its cache in tmp_path; nothing patched before or after."""
    from aitune.torch.jit.config import config as jit_config

    reset_jit()
    jit_config.cache_dir = tmp_path / "jit"
    jit_config.device = "cpu"
    try:
        yield jit_config
    finally:
        reset_jit()
