"""Shared fixtures: every test starts with an empty module registry, its own cache directory and
default configuration, so tests never see each other's modules, builds or settings."""

from __future__ import annotations

import logging

import pytest

import aitune.torch as ait
from aitune.torch import module_registry
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.config import config


@pytest.fixture(autouse=True)
def _isolate_aitune(tmp_path):
    module_registry.clear()
    config.reset_to_defaults()
    config.cache_dir = tmp_path / "cache"
    yield
    module_registry.clear()
    config.reset_to_defaults()


@pytest.fixture
def cpu_eager_strategy():
    # Serving tests need the eager backend itself: no max-batch search (it would widen the
    # recorded ranges) and no gate (eager against eager never clears 1.01x).
    return (ait.OneBackendStrategy(TorchEagerBackend())
            .enable_find_max_batch_size(False)
            .enable_performance_validation(False))


@pytest.fixture
def aitune_log(caplog):
    """caplog that also sees the `aitune` logger, which stops propagation once ait.tune has
    configured it (SPEC §3.1: aitune configures only its own logger)."""
    logger = logging.getLogger("aitune")
    logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, logger="aitune")
    try:
        yield caplog
    finally:
        logger.removeHandler(caplog.handler)
