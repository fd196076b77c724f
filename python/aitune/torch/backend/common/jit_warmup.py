"""Warm-up of torch.compile-based JIT backends (Inductor JIT, Torch-TensorRT JIT): which calls
compile the tuned forward before tuning measures it, and running them."""

from __future__ import annotations

import contextlib
import copy
import logging
from typing import Callable

import torch

from aitune.torch.backend.common.export_shapes import prepare_export_sample
from aitune.torch.config import config
from aitune.torch.graph.graph_spec import GraphSpec, Sample

logger = logging.getLogger("aitune")


def warmup_calls(
    graph: GraphSpec | None, data: list[Sample], widen: bool, backend_name: str = "backend"
) -> list[tuple[tuple, dict]]:
    """Every stored sample, plus (with `widen`, for dynamic builds) sample 0 with its size-1
    dynamic axes widened to 2, so that Dynamo's 0/1 specialisation does not recompile on the
    first real call."""
    calls = [(tuple(s.args), dict(s.kwargs)) for s in data]
    if graph is not None and data and widen:
        try:
            calls.append(prepare_export_sample(graph, data[0]))
        except Exception as e:  # noqa: BLE001 - an optional extra warm-up, never a build failure
            logger.debug("%s: no widened warm-up sample: %s", backend_name, e)
    return calls


def run_warmup(
    fn: Callable,
    calls: list[tuple[tuple, dict]],
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> None:
    """Calls `fn` on a copy of each call (compiled code may write into its inputs) under
    no_grad and `context()` (the backend's autocast)."""
    with torch.no_grad(), context():
        for args, kwargs in calls:
            call_args, call_kwargs = copy.deepcopy((args, kwargs))
            fn(*call_args, **call_kwargs)


def original_forward(module: torch.nn.Module) -> Callable:
    """The module's own forward: a wrapped module's instance `forward` is aitune's router, and
    compiling it would recurse into aitune."""
    return getattr(module, "_aitune_original_forward", None) or module.forward


def specialize_float_patch() -> contextlib.AbstractContextManager:
    """Dynamo traces Python floats as symbols by default (`specialize_float=False`); in a
    `dynamic=True` compile a float that an operator needs as a plain number (BatchNorm's or
    LayerNorm's eps) is specialised late, and Inductor's tensorify pass then restarts the whole
    Dynamo and AOTAutograd trace (TensorifyScalarRestartAnalysis): every dynamic build of a model
    with such a layer was traced twice. In strict mode (config.strict_mode, the default) a float
    input is part of aitune's graph identity (docs/reference/recording.md#graph-identity), so a graph
    never sees another value and specialising floats up front changes nothing it serves; with
    strict mode off, torch's default stays."""
    if not config.strict_mode or not hasattr(torch._dynamo.config, "specialize_float"):
        return contextlib.nullcontext()
    return torch._dynamo.config.patch(specialize_float=True)
