"""Serving a torch module (an ait.Module, tuned or loaded from a checkpoint) behind the
batcher: which item shapes its graphs accept, the tuned batch sizes for each, and one batched
call through the module — for a tuned ait.Module, its native dispatch (docs/serving.md)."""

from __future__ import annotations

import array
import dataclasses
from typing import Any, Hashable

import torch

from aitune.dynamo.requests import BadRequest
from aitune.torch.graph.graph_spec import GraphSpec


@dataclasses.dataclass
class ItemShape:
    """What one graph with a single batched tensor input accepts per item (the batch axis
    removed), and its tuned batch sizes."""

    graph: str
    dtype: torch.dtype
    min_shape: list[int]
    max_shape: list[int]
    batch_sizes: list[int]

    def accepts(self, shape: tuple[int, ...]) -> bool:
        return len(shape) == len(self.min_shape) and all(
            lo <= n <= hi for n, lo, hi in zip(shape, self.min_shape, self.max_shape)
        )

    def describe(self) -> str:
        dims = [str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in zip(self.min_shape, self.max_shape)]
        return f"[{', '.join(dims)}] (graph `{self.graph}`)"


def tuned_batch_sizes(graph: GraphSpec, min_bs: int, max_bs: int) -> list[int]:
    """The batch sizes the graph was tuned at (ait.tune's batch_sizes that reached it) and its
    max; after ait.load, where those are not stored, the powers of two within its range."""
    observed = {bs for bs in getattr(graph, "observed_batch_sizes", ()) or () if min_bs <= bs <= max_bs}
    if not observed:
        observed = {1 << i for i in range(max_bs.bit_length()) if min_bs <= (1 << i) <= max_bs} | {min_bs}
    return sorted(observed | {max_bs})


def item_shapes(module: Any) -> list[ItemShape]:
    """The batched single-tensor-input graphs of an ait.Module; [] for anything else."""
    shapes = []
    for graph in getattr(module, "graph_specs", None) or []:
        tensors = graph.input_spec.tensors
        if len(tensors) != 1 or len(graph.input_spec.leaves) != 1 or not graph.has_batch_axis():
            continue
        spec = tensors[0].spec
        min_bs, max_bs = spec.min_shape[0], spec.max_shape[0]
        shapes.append(
            ItemShape(
                graph.name,
                tensors[0].dtypes[0],
                list(spec.min_shape[1:]),
                list(spec.max_shape[1:]),
                tuned_batch_sizes(graph, min_bs, max_bs),
            )
        )
    return shapes


# Integer dtypes a list of ints reaches through a C array (array.array's type codes of the same
# item size) and torch.frombuffer, several times faster than torch.tensor(list), which converts
# value by value: 2.3 ms instead of 7.5 ms for 3*224*224 ints as int64, 0.4 ms as uint8.
_ARRAY_CODES = {
    dtype: code
    for dtype, code in ((torch.int64, "q"), (torch.int32, "i"), (torch.int16, "h"), (torch.int8, "b"))
    if array.array(code).itemsize == dtype.itemsize
}


def ids_tensor(ids: list[int], dtype: torch.dtype) -> torch.Tensor:
    """torch.tensor(ids, dtype=dtype), faster for integer dtypes. A value the fast path refuses
    (outside the dtype's range) goes to torch.tensor, so what is refused, and how, is as before:
    a RuntimeError (beyond the dtype), a ValueError (beyond int64), or torch's own wrap-around
    (negative values as uint8)."""
    if ids:
        try:
            if dtype == torch.uint8:
                return torch.frombuffer(bytearray(ids), dtype=dtype)
            code = _ARRAY_CODES.get(dtype)
            if code is not None:
                return torch.frombuffer(array.array(code, ids), dtype=dtype)
        except (OverflowError, TypeError, ValueError):
            pass
    return torch.tensor(ids, dtype=dtype)


class ModuleEngine:
    """Turns token-id items into tensors of the graph's dtype, runs batches, splits outputs."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.shapes = item_shapes(module)
        if not self.shapes:
            raise TypeError(
                "dynamo_worker serves a torch module directly only when it is a tuned ait.Module (or loaded with "
                "ait.load) with a graph of one batched tensor input; wrap anything else in a function that "
                "takes the request's input"
            )
        self.device = getattr(module, "device", None) or torch.device("cpu")

    def item(self, ids: list[int], position: int) -> tuple[Hashable, torch.Tensor]:
        """(batching key, tensor) for one item; BadRequest when no graph accepts its shape."""
        shape = (len(ids),)
        for index, accepted in enumerate(self.shapes):
            if accepted.accepts(shape):
                try:
                    tensor = ids_tensor(ids, accepted.dtype)
                except (OverflowError, RuntimeError, ValueError) as e:
                    raise BadRequest(f"'input[{position}]' cannot be a {accepted.dtype} tensor: {e}") from e
                return (index, shape), tensor
        accepted_text = "; ".join(s.describe() for s in self.shapes)
        raise BadRequest(
            f"'input[{position}]' has {len(ids)} token ids; the tuned model accepts item shapes {accepted_text}"
        )

    def check_request_size(self, count: int) -> None:
        """BadRequest when a request carries more items than the largest tuned batch size: the most
        the tuned model runs in one call, so the most one request may ask for (a larger one would
        hold the model for several calls while the other requests wait)."""
        largest = max(max(s.batch_sizes) for s in self.shapes)
        if count > largest:
            raise BadRequest(
                f"'input' has {count} items; the tuned model runs at most {largest} per call (its largest tuned "
                f"batch size), so a request may carry at most {largest}"
            )

    def sizes_for(self, key: Hashable) -> list[int]:
        return self.shapes[key[0]].batch_sizes  # type: ignore[index]

    def run_batch(self, key: Hashable, items: list[torch.Tensor], padded: int) -> list[torch.Tensor]:
        batch = torch.stack(items + [items[-1]] * (padded - len(items))).to(self.device)
        with torch.no_grad():  # grad mode is per thread: this runs in the batcher's model thread
            output = self.module(batch)
        if not isinstance(output, torch.Tensor) or output.dim() < 1 or output.shape[0] != padded:
            raise TypeError(
                f"the module returned {type(output).__name__} "
                f"{list(output.shape) if isinstance(output, torch.Tensor) else ''} for a batch of "
                f"{padded}; an embedding worker needs one tensor [batch, dim]"
            )
        rows = output.detach().float().cpu()
        return [rows[i].reshape(-1) for i in range(len(items))]
