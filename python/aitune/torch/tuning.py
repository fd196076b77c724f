"""ait.tune: gather samples by running the user's function, then tune every registered
module (SPEC §3.1)."""

from __future__ import annotations

import logging
import shutil
import time
from typing import Any, Callable, Iterable

import torch

from aitune.torch import module_registry
from aitune.torch.config import config, normalize_device
from aitune.torch.dataloader import samples_generator
from aitune.torch.global_context import published_batch_size
from aitune.torch.logging_utils import external_logging_disabled, format_duration, setup_logging
from aitune.torch.module.state import ModuleState
from aitune.torch.tune_data import report as tune_data
from aitune.torch.utils.tensors import to_device

logger = logging.getLogger("aitune")
DEFAULT_BATCH_SIZES = [1, 2]
_RULE = "═" * 100


def _resolve_device(device: Any) -> torch.device:
    device = normalize_device(device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available. Please check your CUDA installation.")
    return torch.device(device)


def _resolve_batch_sizes(batch_sizes: Iterable[int] | None) -> list[int]:
    if not batch_sizes:
        logger.info("No batch sizes provided, using default batch sizes %s.", DEFAULT_BATCH_SIZES)
        return list(DEFAULT_BATCH_SIZES)
    sizes = list(batch_sizes)
    for bs in sizes:
        if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
            from aitune.exceptions import AITuneUserInputError

            raise AITuneUserInputError(f"batch_sizes must be positive ints, got {bs!r} in {sizes}")
    if len(set(sizes)) == 1:
        logger.warning("Only 1 batch size provided, static shapes will be assumed.")
    return sizes


def tune(func: Callable, dataset: Any, batch_sizes: Iterable[int] | None = None,
         max_num_batches_per_batch_size: int | None = None, device: Any = "cuda:0", dry_run: bool = False,
         disable_external_logging: bool = False, clear_cache: bool = False, ignore_failing_modules: bool = True) -> None:
    """Runs `func` over `dataset` at each batch size so wrapped modules record their calls,
    then tunes each registered module in registration order and activates the results."""
    setup_logging()
    start = time.perf_counter()
    with external_logging_disabled(disable_external_logging):
        if clear_cache and config.cache_dir.exists():
            shutil.rmtree(config.cache_dir)
        _tune(func, dataset, batch_sizes, max_num_batches_per_batch_size, device, dry_run, ignore_failing_modules)
    logger.info("⏱️ ait.tune completed in %s", format_duration(time.perf_counter() - start))


def _tune(func: Callable, dataset: Any, batch_sizes: Iterable[int] | None, max_num_batches_per_batch_size: int | None,
          device: Any, dry_run: bool, ignore_failing_modules: bool) -> None:
    with tune_data.run_span("dry_run" if dry_run else config.mode.value):
        device = _resolve_device(device)
        sizes = _resolve_batch_sizes(batch_sizes)

        for bs, args, kwargs in samples_generator(dataset, sizes, max_num_batches_per_batch_size):
            # Batches follow the tuning device, so a dataset prepared on the CPU tunes a GPU model.
            if device.type != "meta":
                args, kwargs = to_device((args, kwargs), device)
            with published_batch_size(bs), torch.no_grad():
                func(*args, **kwargs)

        modules = list(module_registry.MODULE_REGISTRY.values())
        for module in modules:
            for other in modules:
                if other is not module:
                    other.deactivate()
            logger.info(_RULE)
            if module.state is ModuleState.TUNED:
                # Tuned by an earlier ait.tune call: keep it (re-tuning needs an explicit reset).
                logger.info("⏭️ Module `%s` is already tuned; skipping it.", module.name)
                continue
            logger.info("🎯 Tuning module: `%s` (all graphs)", module.name)
            try:
                with tune_data.module_span(module.name):
                    module.tune(device=device, dry_run=dry_run)
                logger.info("✅ Tuning module: `%s` completed.", module.name)
            except Exception as e:
                from aitune.exceptions import DiskSpaceError

                if isinstance(e, DiskSpaceError) or not ignore_failing_modules:
                    raise
                logger.warning("⚠️ Tuning module: `%s` failed: %s: %s", module.name, type(e).__name__, e)
                logger.warning("  the original module will be used (passthrough)")
                module.enable_passthrough(force=True)
        logger.info(_RULE)
        logger.info("✅ Completed tuning all modules.")
        if not dry_run:
            _activate(modules)


def _activate(modules: list) -> None:
    logger.info("🎯 Activating tuned modules for inference:")
    for module in modules:
        module.activate()
        logger.info("📦 module: %s", module.name)
        if module.state is not ModuleState.TUNED:
            for graph in module.graph_specs:
                logger.info("  ➤ graph: %s\n  ➤ tuning failed: using original module", graph.display_name)
            continue
        for graph, backend in module.tuned_module.backends:
            logger.info("  ➤ graph: %s\n%s\n    backend: %s", graph.display_name, graph.input_spec.table(),
                        backend.describe())
