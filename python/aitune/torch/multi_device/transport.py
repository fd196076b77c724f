"""What crosses from the tuning process to a worker process: the module (its weights load
straight onto the worker's device), the strategy as configured (never a built backend or a
module: the worker builds its own), and the graph with its samples and eager references."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import pickle
from typing import TYPE_CHECKING, Iterator

import torch

from aitune._native import _C
from aitune.torch.backend.backend import Backend, BackendState
from aitune.torch.checkpoint.graphs import graph_from_native, graph_to_json
from aitune.torch.graph.graph_spec import GraphSpec, Sample

if TYPE_CHECKING:
    from aitune.torch.tune_strategy.context import GraphContext
    from aitune.torch.tune_strategy.tune_strategy import TuneStrategy


@contextlib.contextmanager
def plain_forwards(module: torch.nn.Module) -> Iterator[None]:
    """ait.Module replaces each wrapped module's `forward` with a router closure, which cannot
    be pickled; meanwhile the original forward is the module's again."""
    saved = []
    for sub in module.modules():
        state = sub.__dict__
        if "_aitune_original_forward" not in state:
            continue
        original = state.pop("_aitune_original_forward")
        saved.append((sub, state.pop("forward", None), original))
        if getattr(original, "__func__", None) is not getattr(type(sub), "forward", None):
            state["forward"] = original  # an instance forward of the user's own stays
    try:
        yield
    finally:
        for sub, router, original in saved:
            sub.__dict__.pop("forward", None)
            object.__setattr__(sub, "_aitune_original_forward", original)
            if router is not None:
                object.__setattr__(sub, "forward", router)


def dumps_tensors(value: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def loads_tensors(data: bytes, device: torch.device | str) -> object:
    # Trusted: written by this program's own tuning process, moments ago.
    return torch.load(io.BytesIO(data), map_location=device, weights_only=False)


def module_payload(module: torch.nn.Module) -> bytes:
    with plain_forwards(module):
        try:
            return dumps_tensors(module)
        except Exception as e:
            raise TypeError(
                f"tuning on several devices sends the module to worker processes, but "
                f"{type(module).__name__} cannot be pickled: {type(e).__name__}: {e}"
            ) from e


class _StrategyPickler(pickle.Pickler):
    """Leaves out modules and built backends (a strategy keeps them from an earlier graph)."""

    def persistent_id(self, obj: object) -> str | None:
        if isinstance(obj, torch.nn.Module):
            return "left-out"
        if isinstance(obj, Backend) and obj.state is not BackendState.INIT:
            return "left-out"
        return None


class _StrategyUnpickler(pickle.Unpickler):
    def persistent_load(self, pid: object) -> None:
        return None


def strategy_payload(strategy: TuneStrategy) -> bytes:
    portable = copy.copy(strategy)
    portable.sink = None  # the worker logs to the `aitune` logger, which it forwards
    buffer = io.BytesIO()
    try:
        _StrategyPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(portable)
    except Exception as e:
        raise TypeError(
            f"tuning on several devices sends the strategy to worker processes, but "
            f"{strategy.describe()} cannot be pickled: {type(e).__name__}: {e}"
        ) from e
    return buffer.getvalue()


def load_strategy(data: bytes) -> TuneStrategy:
    return _StrategyUnpickler(io.BytesIO(data)).load()


def graph_payload(ctx: GraphContext) -> dict[str, object]:
    graph = ctx.graph
    return {
        "module_name": ctx.module_name,
        # As a checkpoint holds it; the worker reads it with the checkpoint's one reader.
        "graph": json.dumps(graph_to_json(graph)),
        "forward_params": graph.forward_params,
        "dynamic_shapes": graph.dynamic_shapes,
        "observed_batch_sizes": list(graph.observed_batch_sizes),
        "batch_sizes": list(ctx.batch_sizes),
        "samples": dumps_tensors(ctx.data),
        "refs": dumps_tensors(ctx.refs),
        "cache_dir": str(ctx.cache_dir),
        # Deadlines are on time.monotonic(), one clock for every process of the machine.
        "budget": ctx.budget,
    }


def load_graph(payload: dict[str, object], device: torch.device) -> tuple[GraphSpec, list[Sample], object]:
    """(graph, samples on `device`, eager references on the host)."""
    spec = _C.read_graph_spec(payload["graph"])
    graph = graph_from_native(spec, payload["forward_params"], payload["dynamic_shapes"])
    graph.observed_batch_sizes = list(payload["observed_batch_sizes"])
    samples = loads_tensors(payload["samples"], device)
    graph.samples = samples
    return graph, samples, loads_tensors(payload["refs"], "cpu")
