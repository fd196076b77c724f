"""ait.tune: gather samples by running the user's function, then tune every registered
module (docs/reference/tuning.md#the-tune-call)."""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from typing import TYPE_CHECKING, Callable, Iterable, Union

import torch
import torch.utils._pytree

from aitune.exceptions import AITuneError, AITuneUserInputError, DiskSpaceError, InvalidValueError, NoValidBackendError
from aitune.torch import module_registry
from aitune.torch.config import config, normalize_device
from aitune.torch.dataloader import samples_generator
from aitune.torch.global_context import published_batch_size
from aitune.torch.logging_utils import external_logging_disabled, format_duration, setup_logging
from aitune.torch.module.state import ModuleState
from aitune.torch.tune_data import recorder as tune_data
from aitune.torch.tune_strategy.budget import session_started as budget_session_started
from aitune.torch.tune_strategy.context import installed as executor_installed
from aitune.torch.utils.bytecode import bytecode_state
from aitune.torch.utils.tensors import to_device

if TYPE_CHECKING:
    from aitune.torch.module.wrapper import Module

Device = Union[str, torch.device]

logger = logging.getLogger("aitune")
DEFAULT_BATCH_SIZES = [1, 2]
_RULE = "═" * 100


def _resolve_device(device: Device) -> torch.device:
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
            raise InvalidValueError(f"batch_sizes must be positive ints, got {bs!r} in {sizes}")
    if len(set(sizes)) == 1:
        logger.warning("Only 1 batch size provided, static shapes will be assumed.")
    return sizes


def dataset_hint(error: Exception, batch_size: int, args: tuple, kwargs: dict) -> str:
    """The message for a first batched call that raised: dataset items are single samples that
    ait.tune stacks into batches, the shapes of one item and of the batch, and the fix."""
    shapes = []
    for path, value in torch.utils._pytree.tree_flatten_with_path((args, kwargs))[0]:
        if isinstance(value, torch.Tensor) and value.dim() >= 1:
            name = ("args" if path[0].idx == 0 else "kwargs") + torch.utils._pytree.keystr(path[1:])
            shapes.append(f"{name}: batch {list(value.shape)}, one item {list(value.shape[1:])}")
    first_line = (str(error).strip().splitlines() or [""])[0]
    listed = "; ".join(shapes[:4]) + (f"; … ({len(shapes)} tensors)" if len(shapes) > 4 else "")
    return (
        f"ait.tune: the first call with a batch of {batch_size} raised {type(error).__name__}: {first_line}\n"
        "Dataset items are single, unbatched samples: ait.tune stacks batch_size of them along a new leading "
        f"axis. The call got {listed or 'no tensors'}.\n"
        "If your items are already batches, pass single samples instead, e.g. `dataset = list(batch.unbind(0))` "
        "for a tensor batch, or give ait.tune a DataLoaderFactory that yields your batches; if the shapes above "
        "are right, the error comes from the model itself (see the chained exception)."
    )


def _resolve_devices(devices: Iterable[Device]) -> list[torch.device]:
    """ait.tune's `devices`: one type for all (their measurements are compared), each usable."""
    if isinstance(devices, (str, torch.device)):
        raise InvalidValueError(f"devices must be a list of devices, e.g. ['cuda:0', 'cuda:1'], got {devices!r}")
    resolved = [_resolve_device(d) for d in devices]
    if not resolved:
        raise InvalidValueError("devices must name at least one device, got an empty list")
    kinds = sorted({d.type for d in resolved})
    if len(kinds) > 1:
        raise InvalidValueError(
            f"devices must all be of one type, since candidates measured on them are compared; got {kinds} in "
            f"{[str(d) for d in resolved]}"
        )
    if resolved[0].type == "cuda":
        count = torch.cuda.device_count()
        missing = [str(d) for d in resolved if (d.index or 0) >= count]
        if missing:
            raise InvalidValueError(f"devices {missing} do not exist: this machine has {count} CUDA device(s)")
    return resolved


def tune(
    func: Callable,
    dataset: object,
    batch_sizes: Iterable[int] | None = None,
    max_num_batches_per_batch_size: int | None = None,
    device: Device = "cuda:0",
    dry_run: bool = False,
    disable_external_logging: bool = False,
    clear_cache: bool = False,
    ignore_failing_modules: bool = True,
    devices: Iterable[Device] | None = None,
) -> None:
    """Runs `func` over `dataset` at each batch size so wrapped modules record their calls,
    then tunes each registered module in registration order and activates the results.

    `devices` (e.g. ["cuda:0", "cuda:1"]) evaluates each graph's candidates in parallel, one
    worker process per device, and decides as on one device; the first device is the tuning
    device (it replaces `device`) where the modules are recorded and the results serve
    (docs/guide.md, "Tuning on several GPUs")."""
    setup_logging()
    start = time.perf_counter()
    _warn_once_without_bytecode()
    with external_logging_disabled(disable_external_logging):
        if clear_cache and config.cache_dir.exists():
            shutil.rmtree(config.cache_dir)
        pool_devices = _resolve_devices(devices) if devices is not None else []
        if pool_devices:
            device = pool_devices[0]
        _tune(
            func,
            dataset,
            batch_sizes,
            max_num_batches_per_batch_size,
            device,
            dry_run,
            ignore_failing_modules,
            pool_devices if len(pool_devices) > 1 and not dry_run else [],
        )
    logger.info("⏱️ ait.tune completed in %s", format_duration(time.perf_counter() - start))


_BYTECODE_CHECKED: list[bool] = []


def _warn_once_without_bytecode() -> None:
    """A process that must compile torch's compiler modules from source says so, once."""
    if _BYTECODE_CHECKED:
        return
    _BYTECODE_CHECKED.append(True)
    hint = bytecode_state().hint()
    if hint is not None:
        logger.warning("⚠️ %s", hint)


def _tune(
    func: Callable,
    dataset: object,
    batch_sizes: Iterable[int] | None,
    max_num_batches_per_batch_size: int | None,
    device: Device,
    dry_run: bool,
    ignore_failing_modules: bool,
    pool_devices: list[torch.device],
) -> None:
    from aitune.torch.multi_device.pool import device_pool

    # The pool's workers start first, so they boot while the dataset is recorded. The tuning
    # budget (config.tuning_budget_s, a strategy's budget_s) counts from here.
    with (
        budget_session_started(),
        tune_data.run_span("dry_run" if dry_run else config.mode.value),
        device_pool(pool_devices) if pool_devices else contextlib.nullcontext() as pool,
    ):
        device = _resolve_device(device)
        sizes = _resolve_batch_sizes(batch_sizes)

        first = True
        for bs, args, kwargs in samples_generator(dataset, sizes, max_num_batches_per_batch_size):
            # Batches follow the tuning device, so a dataset prepared on the CPU tunes a GPU model.
            if device.type != "meta":
                args, kwargs = to_device((args, kwargs), device)
            with published_batch_size(bs), torch.no_grad():
                if not first:
                    func(*args, **kwargs)
                    continue
                first = False
                try:
                    func(*args, **kwargs)
                except (AITuneError, KeyboardInterrupt):
                    raise
                except Exception as e:
                    raise AITuneUserInputError(dataset_hint(e, bs, args, kwargs)) from e

        modules = list(module_registry.MODULE_REGISTRY.values())
        if pool is not None:
            pool.wait_ready()  # booting workers would slow this process's own measurements
        try:
            with executor_installed(pool):  # the strategies evaluate their candidates in the pool
                _tune_modules(modules, device, dry_run, ignore_failing_modules)
        except BaseException:
            # Ctrl-C, or an error re-raised: the modules tuned so far (by this or an earlier
            # ait.tune) serve again, instead of staying deactivated for the next module's tuning.
            _reactivate_tuned(modules)
            raise
        logger.info(_RULE)
        logger.info("✅ Completed tuning all modules.")
        if not dry_run:
            _activate(modules)


def _reactivate_tuned(modules: list) -> None:
    for module in modules:
        if module.state is ModuleState.TUNED:
            try:
                module.activate()
            except Exception as e:  # noqa: BLE001 - the original error is the one to report
                logger.warning("⚠️ Could not reactivate module `%s`: %s: %s", module.name, type(e).__name__, e)


def _tune_modules(modules: list, device: torch.device, dry_run: bool, ignore_failing_modules: bool) -> None:
    """Tunes each module in registration order, with every other module deactivated meanwhile."""
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
            tune_data.record_module_outcome(module.name, "tuned")
            logger.info("✅ Tuning module: `%s` completed.", module.name)
        except NoValidBackendError as e:
            if e.outcome is None or not ignore_failing_modules:
                _failed(module, e, ignore_failing_modules)
                continue
            # Nothing beat eager: not an error. The strategy logged why (🟰 … kept eager — …).
            tune_data.record_module_outcome(module.name, "kept_eager")
            logger.info("🟰 Module `%s` kept eager: the original module serves its calls.", module.name)
            module.enable_passthrough(force=True)
        except Exception as e:
            _failed(module, e, ignore_failing_modules)


def _failed(module: Module, error: Exception, ignore_failing_modules: bool) -> None:
    """An unexpected failure: re-raised unless ignore_failing_modules, else a WARNING and passthrough."""
    tune_data.record_module_outcome(module.name, "failed")
    if isinstance(error, DiskSpaceError) or not ignore_failing_modules:
        raise error
    logger.warning("⚠️ Tuning module: `%s` failed: %s: %s", module.name, type(error).__name__, error)
    logger.warning("  the original module will be used (passthrough)")
    module.enable_passthrough(force=True)


def _activate(modules: list) -> None:
    logger.info("🎯 Activating tuned modules for inference:")
    for module in modules:
        module.activate()
        logger.info("📦 module: %s", module.name)
        if module.state is not ModuleState.TUNED:
            kept = tune_data.module_outcome(module.name) == "kept_eager"
            for graph in module.graph_specs:
                logger.info(
                    "  ➤ graph: %s\n  ➤ %s: using original module",
                    graph.display_name,
                    "kept eager" if kept else "tuning failed",
                )
            continue
        for graph, backend in module.tuned_module.backends:
            logger.info(
                "  ➤ graph: %s\n%s\n    backend: %s", graph.display_name, graph.input_spec.table(), backend.describe()
            )


# AITune's scripts import save and load from here too (docs/guide.md, "Coming from AITune").
from aitune.torch.checkpoint.load import load  # noqa: E402, F401 - re-exported
from aitune.torch.checkpoint.save import save  # noqa: E402, F401 - re-exported
