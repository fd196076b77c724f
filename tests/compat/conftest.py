"""Fixtures of the compatibility tier (AITune's API at AITune's paths)."""

from __future__ import annotations

import atexit

import pytest


def _reset_jit() -> None:
    """No patch of nn.Module.__init__, no heads, default jit_config, no exit hook."""
    from aitune.torch.jit import patcher, telemetry
    from aitune.torch.jit.config import config as jit_config
    from aitune.torch.jit.exit_report import at_exit
    from aitune.torch.jit.state import runtime

    patcher._uninstall()
    patcher._patcher.global_enabled = False
    patcher._patcher.scoped_depth = 0
    if patcher._patcher.atexit_registered:
        atexit.unregister(at_exit)
        patcher._patcher.atexit_registered = False
    runtime.reset()
    telemetry.reset()
    jit_config.reset_to_defaults()


@pytest.fixture
def jit_clean(tmp_path):
    """JIT tuning on the CPU with its cache in tmp_path; nothing patched before or after."""
    from aitune.torch.jit.config import config as jit_config

    _reset_jit()
    jit_config.cache_dir = tmp_path / "jit"
    jit_config.device = "cpu"
    try:
        yield jit_config
    finally:
        _reset_jit()
