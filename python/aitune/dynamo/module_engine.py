"""Serving a torch module (an ait.Module, tuned or loaded from a checkpoint) behind the
batcher: which item shapes its graphs accept, the tuned batch sizes for each, the range its
integer inputs' token ids must lie in, and one batched call through the module — for a tuned
ait.Module, its native dispatch (docs/serving.md)."""

from __future__ import annotations

import array
import dataclasses
import sys
from typing import Any, Hashable, Sequence, Union

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


# An item as the batcher holds it: the values in a C buffer of the dtype's layout, or a tensor
# where only torch.tensor takes them (a float dtype, or values the fast path refuses).
Item = Union[bytearray, array.array, torch.Tensor]


def ids_buffer(ids: list[int], dtype: torch.dtype) -> Item:
    """The values of torch.tensor(ids, dtype=dtype), without a torch call for integer dtypes: this
    runs on the worker's event loop once per item, and a torch call there costs a tensor and its
    release (the model thread joins the buffers into the batch with one torch.frombuffer). A value
    the fast path refuses (outside the dtype's range) goes to torch.tensor, so what is refused, and
    how, is as before: a RuntimeError (beyond the dtype), a ValueError (beyond int64), or torch's
    own wrap-around (negative values as uint8)."""
    if ids:
        try:
            if dtype == torch.uint8:
                return bytearray(ids)
            code = _ARRAY_CODES.get(dtype)
            if code is not None:
                return array.array(code, ids)
        except (OverflowError, TypeError, ValueError):
            pass
    return torch.tensor(ids, dtype=dtype)


# The dtypes an item may come in as raw bytes (requests.RAW_ITEM_PREFIX): those with a C layout here.
RAW_DTYPES = frozenset((torch.uint8, *_ARRAY_CODES))


def raw_buffer(raw: bytes, dtype: torch.dtype) -> Item:
    """An item sent as raw little-endian bytes, as ids_buffer would hold its values."""
    if dtype == torch.uint8:
        return bytearray(raw)
    values = array.array(_ARRAY_CODES[dtype])
    values.frombytes(raw)
    if sys.byteorder == "big":
        values.byteswap()
    return values


def as_tensor(item: Item, dtype: torch.dtype) -> torch.Tensor:
    return item if isinstance(item, torch.Tensor) else torch.frombuffer(item, dtype=dtype)


def batch_tensor(items: list[Item], padded: int, dtype: torch.dtype) -> torch.Tensor:
    """The items stacked, the last repeated up to `padded` rows: one torch.frombuffer over the
    joined buffers when every item is one, else torch.stack."""
    rows = items + [items[-1]] * (padded - len(items))
    if any(isinstance(r, torch.Tensor) for r in rows):
        return torch.stack([as_tensor(r, dtype) for r in rows])
    # bytearray's join: one writable copy of the rows, which torch.frombuffer takes as it is.
    return torch.frombuffer(bytearray().join(rows), dtype=dtype).view(padded, -1)


# Item dtypes an explicit token_id_limit checks; a range learned from the module checks only the
# dtypes token ids come as (int64, int32), not e.g. the uint8 pixels of an image model that has an
# nn.Embedding somewhere else.
INTEGER_DTYPES = frozenset((torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8))
TOKEN_DTYPES = frozenset((torch.int64, torch.int32))


@dataclasses.dataclass(frozen=True)
class TokenIdRange:
    """The token ids a module's integer inputs accept, [0, limit), and where the limit came
    from; `limit` None: no check, `source` says why."""

    limit: int | None
    source: str
    dtypes: frozenset = TOKEN_DTYPES  # the item dtypes checked

    def describe(self) -> str:
        if self.limit is None:
            return f"no token-id range is enforced: {self.source}"
        return f"token ids must lie in [0, {self.limit}): {self.source}"


def input_embedding_rows(module: Any) -> tuple[int | None, str]:
    """(rows, where from) of the embedding table a module's token ids index, where that can be
    known reliably: the table `get_input_embeddings()` returns (the transformers API), else the
    module's only torch.nn.Embedding when every graph of the module takes one tensor (the ids);
    (None, why not) otherwise."""
    getter = getattr(module, "get_input_embeddings", None)
    if callable(getter):
        try:
            table = getter()
        except Exception:  # noqa: BLE001 - transformers' base raises NotImplementedError; fall through
            table = None
        rows = getattr(table, "num_embeddings", None)
        if isinstance(rows, int) and not isinstance(rows, bool) and rows > 0:
            return rows, f"the module's get_input_embeddings(), a {type(table).__name__} of {rows} rows"
    named = getattr(module, "named_modules", None)
    if not callable(named):
        return None, "the module is no torch module with an embedding table"
    tables = [(name, m) for name, m in named() if isinstance(m, torch.nn.Embedding)]
    if not tables:
        return None, "the module has no torch.nn.Embedding and no get_input_embeddings()"
    if len(tables) > 1:
        names = ", ".join(f"`{name}`" for name, _ in tables[:4]) + (", ..." if len(tables) > 4 else "")
        return None, (
            f"the module has {len(tables)} torch.nn.Embedding modules ({names}) and no get_input_embeddings(): "
            "which one the ids index is unknown"
        )
    graphs = getattr(module, "graph_specs", None) or []
    if any(len(graph.input_spec.leaves) != 1 for graph in graphs):
        return None, "the module has one torch.nn.Embedding but a graph with several inputs: the ids may not index it"
    name, table = tables[0]
    return (
        table.num_embeddings,
        f"the module's one torch.nn.Embedding `{name or '(the module)'}`, of {table.num_embeddings} rows",
    )


def token_id_range(module: Any, shapes: list[ItemShape], explicit: int | None = None) -> TokenIdRange:
    """The range `ModuleEngine.item` checks integer items against: [0, explicit) when the worker's
    `token_id_limit` is given (0: no check; items of any integer dtype), else [0, rows) of the
    module's input embedding table where that is known (`input_embedding_rows`; int64 and int32
    items only)."""
    if explicit == 0:
        return TokenIdRange(None, "token_id_limit is 0 (the check is off)")
    dtypes = INTEGER_DTYPES if explicit is not None else TOKEN_DTYPES
    if not any(s.dtype in dtypes for s in shapes):
        kinds = "an integer tensor" if explicit is not None else "int64 or int32 token ids"
        return TokenIdRange(None, f"no served graph takes {kinds}")
    rows, source = input_embedding_rows(module)
    if explicit is not None:
        known = "" if rows is None else f" ({source})" if rows == explicit else f"; {source}"
        return TokenIdRange(explicit, f"the worker's token_id_limit{known}", INTEGER_DTYPES)
    if rows is None:
        return TokenIdRange(None, f"{source}; set token_id_limit (--token-id-limit) to check the ids")
    return TokenIdRange(rows, source)


# Items up to this many values are range-checked with Python's min/max over the request's list
# (~3 us for 128 ids) instead of a torch op: the check runs on the event loop, and every torch op
# releases the GIL, which the loop then waits to get back from the busy model thread (up to the
# interpreter's switch interval). Larger items (an image's pixels) take one aminmax pass instead
# (~25 us for 150k values, where min/max over the list takes milliseconds).
LIST_CHECK_MAX_VALUES = 4096


def check_token_ids(tensor: Item, ids: Sequence[int], limit: int, position: int) -> None:
    """BadRequest naming the first bound crossed when a value of the item lies outside [0, limit).
    `tensor` is the item as a tensor where `ids` has more than LIST_CHECK_MAX_VALUES values (it is
    not read otherwise). A uint8 tensor holds negative ids wrapped around (torch.tensor's rule), so
    its minimum comes from the request's list."""
    if not ids:
        return
    if len(ids) <= LIST_CHECK_MAX_VALUES:
        low, high = min(ids), max(ids)
    else:
        low, high = (int(v) for v in torch.aminmax(tensor))
        if tensor.dtype == torch.uint8 and isinstance(ids, list):  # raw bytes cannot be negative
            low = min(ids)
    if low < 0 or high >= limit:
        raise BadRequest(f"'input[{position}]': token id {low if low < 0 else high} is outside [0, {limit})")


class ItemRules:
    """What a request's items must be, from the served graphs: their shapes and dtypes, the tuned
    batch sizes and the token-id range. ModuleEngine runs the module in this process;
    engine_link.RemoteEngine sends the batches to an engine process that runs it."""

    def __init__(self, shapes: list[ItemShape], token_ids: TokenIdRange) -> None:
        self.shapes = shapes
        self.token_ids = token_ids

    def item(self, ids: list[int] | bytes, position: int) -> tuple[Hashable, Item]:
        """(batching key, the item's values as ids_buffer holds them) for one item, token ids or
        raw bytes (requests.token_sequences); BadRequest when no graph accepts its shape."""
        if isinstance(ids, (bytes, bytearray)):
            return self._raw_item(bytes(ids), position)
        shape = (len(ids),)
        for index, accepted in enumerate(self.shapes):
            if accepted.accepts(shape):
                try:
                    item = ids_buffer(ids, accepted.dtype)
                except (OverflowError, RuntimeError, ValueError) as e:
                    raise BadRequest(f"'input[{position}]' cannot be a {accepted.dtype} tensor: {e}") from e
                self._check_range(item, ids, accepted.dtype, position)
                return (index, shape), item
        accepted_text = "; ".join(s.describe() for s in self.shapes)
        raise BadRequest(
            f"'input[{position}]' has {len(ids)} token ids; the tuned model accepts item shapes {accepted_text}"
        )

    def _raw_item(self, raw: bytes, position: int) -> tuple[Hashable, Item]:
        for index, accepted in enumerate(self.shapes):
            size = accepted.dtype.itemsize
            shape = (len(raw) // size,)
            if accepted.dtype in RAW_DTYPES and len(raw) % size == 0 and accepted.accepts(shape):
                item = raw_buffer(raw, accepted.dtype)
                self._check_range(item, item, accepted.dtype, position)
                return (index, shape), item
        accepted_text = "; ".join(
            f"{s.describe()} of {s.dtype} ({s.dtype.itemsize} bytes a value)" for s in self.shapes
        )
        raise BadRequest(
            f"'input[{position}]' has {len(raw)} bytes; the tuned model accepts item shapes {accepted_text}, "
            f"raw bytes for {', '.join(sorted(str(d) for d in RAW_DTYPES))} graphs"
        )

    def _check_range(self, item: Item, values: Any, dtype: torch.dtype, position: int) -> None:
        """The token-id range check (check_token_ids) of an item of `dtype` whose values are
        `values` (the request's list, or the item's own buffer)."""
        limit = self.token_ids.limit
        if limit is not None and dtype in self.token_ids.dtypes:
            # A large item's check needs its tensor (check_token_ids): a view, no copy.
            large = len(values) > LIST_CHECK_MAX_VALUES
            check_token_ids(as_tensor(item, dtype) if large else item, values, limit, position)

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


class ModuleEngine(ItemRules):
    """Turns token-id items into tensors of the graph's dtype, runs batches, splits outputs."""

    def __init__(self, module: Any, token_id_limit: int | None = None) -> None:
        shapes = item_shapes(module)
        if not shapes:
            raise TypeError(
                "dynamo_worker serves a torch module directly only when it is a tuned ait.Module (or loaded with "
                "ait.load) with a graph of one batched tensor input; wrap anything else in a function that "
                "takes the request's input"
            )
        super().__init__(shapes, token_id_range(module, shapes, token_id_limit))
        self.module = module
        self.device = getattr(module, "device", None) or torch.device("cpu")

    def run_batch(self, key: Hashable, items: list[Item], padded: int) -> list[list[float]]:
        """The items' output rows as lists of Python floats. Both ends are made here in the model
        thread, the batch from the items' buffers and the rows from the output: the event loop,
        which reads requests and packs responses, makes no torch call per item."""
        return self.output_rows(key, items, padded).tolist()

    def output_rows(self, key: Hashable, items: list[Item], padded: int) -> torch.Tensor:
        """The items' output rows, [len(items), dim] float32 on the CPU (the padding rows dropped)."""
        batch = batch_tensor(items, padded, self.shapes[key[0]].dtype).to(self.device)  # type: ignore[index]
        with torch.no_grad():  # grad mode is per thread: this runs in the batcher's model thread
            output = self.module(batch)
        if not isinstance(output, torch.Tensor) or output.dim() < 1 or output.shape[0] != padded:
            raise TypeError(
                f"the module returned {type(output).__name__} "
                f"{list(output.shape) if isinstance(output, torch.Tensor) else ''} for a batch of "
                f"{padded}; an embedding worker needs one tensor [batch, dim]"
            )
        # The padding rows' outputs never leave the device; one copy for the batch.
        return output.detach()[: len(items)].reshape(len(items), -1).float().cpu()
