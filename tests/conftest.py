"""Shared fixtures: every test starts with an empty module registry, its own cache directory and
default configuration, so tests never see each other's modules, builds or settings."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

# The fakes (tests/fakes) and shared helpers (tests/helpers) are imported by plain name from every
# tier (`from fake_backend import FakeBackend`): on sys.path for the tests and, through it, for the
# processes they spawn with multiprocessing (docs/design.md#tests).
for _folder in ("helpers", "fakes"):
    sys.path.insert(0, str(Path(__file__).resolve().parent / _folder))

# Nothing a test tunes may land in the user's cache (results store, extraction cache): set
# before aitune.torch reads its configuration.
os.environ["AITUNE_CACHE_DIR"] = tempfile.mkdtemp(prefix="aitune-tests-")

import pytest  # noqa: E402
import torch  # noqa: E402

import aitune.torch as ait  # noqa: E402
from aitune.torch import module_registry  # noqa: E402
from aitune.torch.backend import TorchEagerBackend  # noqa: E402
from aitune.torch.config import config  # noqa: E402


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
    return (
        ait.OneBackendStrategy(TorchEagerBackend())
        .enable_find_max_batch_size(False)
        .enable_performance_validation(False)
    )


@pytest.fixture
def aitune_log(caplog):
    """caplog that also sees the `aitune` logger, which stops propagation once ait.tune has
    configured it (docs/reference/tuning.md#the-tune-call: aitune configures only its own logger)."""
    logger = logging.getLogger("aitune")
    logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, logger="aitune")
    try:
        yield caplog
    finally:
        logger.removeHandler(caplog.handler)


@pytest.fixture(scope="session")
def aoti_loads(tmp_path_factory):
    """Skips when torch's own AOTIModelPackageLoader cannot load a package here (on one GPU
    image the generated model library segfaults in its constructor, with torch's loader too)."""
    from aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend import probe_package_load

    path = tmp_path_factory.mktemp("aoti_probe") / "probe.pt2"
    exported = torch.export.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
    torch._inductor.aoti_compile_and_package(exported, package_path=str(path))
    try:
        probe_package_load(path)
    except RuntimeError as e:
        pytest.skip(f"AOTInductor packages cannot be loaded in this environment: {e}")
