"""``ait.inspect``: find the ``nn.Module``s a callable executes and time them
(docs/reference/api.md#top-level-names)."""

from __future__ import annotations

import logging
from typing import Callable, Iterator

import torch

from aitune.exceptions import InvalidTypeError, InvalidValueError
from aitune.torch.dataloader import samples_generator
from aitune.torch.inspecting.module_info import InspectedModulesInfo, ModuleInfo
from aitune.torch.inspecting.module_inspector import ForwardTimer, find_modules, unwrap
from aitune.torch.logging_utils import setup_logging

logger = logging.getLogger("aitune")

DEFAULT_INSPECT_ITERATIONS = 10
DEFAULT_WARMUP_ITERATIONS = 5


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")


def _cycle(dataset: object) -> Iterator[tuple[tuple, dict]]:
    """``(args, kwargs)`` batches of size 1, restarting the dataset whenever it runs out."""
    while True:
        empty = True
        for _, args, kwargs in samples_generator(dataset, [1]):
            empty = False
            yield args, kwargs
        if empty:
            raise InvalidValueError("Dataset is empty; inspect needs at least one sample.")


def inspect(
    obj: object,
    dataset: object,
    inference_function: Callable | None = None,
    number_of_iterations: int = DEFAULT_INSPECT_ITERATIONS,
    warmup_iterations: int = DEFAULT_WARMUP_ITERATIONS,
    min_depth: int = 0,
    max_depth: int = 5,
) -> InspectedModulesInfo:
    """Find the ``nn.Module``s reachable from ``obj`` that execute, and time them.

    Runs ``inference_function(*args, **kwargs)`` (``obj(*args, **kwargs)`` when it is None) on
    the dataset at batch size 1 under ``no_grad``: ``warmup_iterations`` unmeasured calls, then
    ``number_of_iterations`` measured ones, one batch each (the dataset is cycled if shorter).
    Modules shallower than ``min_depth`` are ignored; the search stops at ``max_depth``.

    Returns:
        The topmost executed modules: a module is left out when a module above it (on its path
        from ``obj``) also executed, or when it only ran inside another inspected module.
    """
    setup_logging()
    _check_int("number_of_iterations", number_of_iterations, 1)
    _check_int("warmup_iterations", warmup_iterations, 0)
    _check_int("min_depth", min_depth, 0)
    _check_int("max_depth", max_depth, 0)
    if min_depth > max_depth:
        raise InvalidValueError(f"min_depth ({min_depth}) must not exceed max_depth ({max_depth}).")
    func = inference_function if inference_function is not None else obj
    if not callable(func):
        raise InvalidTypeError(
            f"ait.inspect cannot run the object: '{type(func).__name__}' object is not callable; "
            "expected a callable (a module or a pipeline) or inference_function=<callable>"
        )

    candidates = [f for f in find_modules(obj, max_depth) if f.depth >= min_depth]
    logger.info(
        "🔍 Inspecting %d module(s) found in %s (depth %d..%d).",
        len(candidates),
        type(obj).__name__,
        min_depth,
        max_depth,
    )
    if not candidates:
        logger.warning("No torch modules found in %s within max_depth=%d.", type(obj).__name__, max_depth)
        return InspectedModulesInfo([], number_of_iterations)

    batches = _cycle(dataset)
    with ForwardTimer([f.module for f in candidates]) as timer, torch.no_grad():
        for _ in range(warmup_iterations):
            args, kwargs = next(batches)
            func(*args, **kwargs)
        timer.enabled = True
        for _ in range(number_of_iterations):
            args, kwargs = next(batches)
            func(*args, **kwargs)

    stats = {key: timer.stats[key] for key in (id(unwrap(f.module)) for f in candidates)}
    executed = {key for key, s in stats.items() if s.calls > 0}
    # Every executed candidate gets a ModuleInfo, so a reported module's `parent` is the
    # nearest module above it on its path that was inspected (None at the top).
    infos: dict[int, ModuleInfo] = {}
    for found in candidates:
        key = id(unwrap(found.module))
        s = stats[key]
        parent = next((infos[a] for a in reversed(found.ancestors) if a in infos), None)
        infos[key] = ModuleInfo(
            found.module,
            found.name,
            parent=parent,
            forward_called=s.calls > 0,
            execution_count=s.calls,
            total_execution_time=s.total_time,
            input_types=list(s.input_types),
            output_types=list(s.output_types),
            object_path=found.name,
            depth=found.depth,
            location=found.location,
        )
    top = []
    for found in candidates:
        s = stats[id(unwrap(found.module))]
        if s.calls == 0 or s.top_calls == 0 or any(a in executed for a in found.ancestors):
            continue
        top.append(infos[id(unwrap(found.module))])
    if not top:
        logger.warning("None of the %d module(s) found in %s executed.", len(candidates), type(obj).__name__)
    info = InspectedModulesInfo(top, number_of_iterations)
    logger.info("🔍 Found %d top-level executed module(s): %s", len(top), ", ".join(m.name for m in top))
    return info
