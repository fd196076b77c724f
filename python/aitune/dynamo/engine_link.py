"""One engine process per device, fed by several Dynamo workers (docs/serving.md, "An engine
process per device").

Measured on an H100 (benchmarks/RESULTS.md, 2026-12-07 fifth session): a worker process that holds
both Dynamo's request handling and the model served 2.5-3.3 k requests/s at most, because Dynamo's
binding holds the GIL for ~0.3 ms of every request, so the model thread's batch of 32 took 8.9 ms
instead of 2.3 ms; and several such workers on one GPU time-slice it (a batch-1 call took 2.7 ms
with four workers instead of 0.54). Here the model runs in one process per device, the engine,
which does nothing else; the Dynamo workers (fronts) check and batch the requests and send each
batch to it over a Unix socket.

The wire is `multiprocessing.connection` with an authentication key (AITUNE_ENGINE_AUTHKEY, shared
by the processes `serve --fronts` starts) and bytes only: `send_bytes` / `recv_bytes`, never the
pickling `send` / `recv`. Each message is a 4-byte little-endian header length, a JSON header and
raw bytes. The engine first sends the item rules (shapes, dtypes, batch sizes, token-id range) so
a front refuses a bad request itself; then each batch is
`{"key": [graph, [values...]], "padded": n, "lengths": [bytes per item]}` + the items' bytes, and
the answer `{"rows": r, "dim": d}` + r*d float32 values, or `{"error": "..."}`."""

from __future__ import annotations

import array
import json
import logging
import math
import os
import signal
import struct
import sys
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from typing import Any, Hashable

import torch

from aitune.dynamo.config import ENGINE_AUTHKEY_ENV
from aitune.dynamo.module_engine import (
    INTEGER_DTYPES,
    TOKEN_DTYPES,
    Item,
    ItemRules,
    ItemShape,
    ModuleEngine,
    TokenIdRange,
)

logger = logging.getLogger("aitune.dynamo")

_LENGTH = struct.Struct("<I")
MAX_HEADER_BYTES = 1 << 20
MAX_MESSAGE_BYTES = 1 << 31  # a batch's items or rows; recv_bytes refuses a longer message
# Item dtypes the wire carries (their torch names); anything else in a header is refused.
WIRE_DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.bool,
    )
}


class EngineLinkError(RuntimeError):
    """A message on the engine link that is not what the protocol allows, or an engine that
    could not be reached."""


def authkey_from_env() -> bytes:
    key = os.environ.get(ENGINE_AUTHKEY_ENV, "")
    if len(key) < 16:
        raise EngineLinkError(
            f"{ENGINE_AUTHKEY_ENV} must hold the engine link's shared secret (at least 16 characters; "
            "`python -m aitune.dynamo serve --fronts K` sets it for the processes it starts), "
            f"got {len(key)} characters"
        )
    return key.encode()


def encode(header: dict[str, Any], payload: bytes = b"") -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    return _LENGTH.pack(len(text)) + text + payload


def decode(message: bytes) -> tuple[dict[str, Any], memoryview]:
    """(header, payload) of one message; EngineLinkError for anything else."""
    view = memoryview(message)
    if len(view) < _LENGTH.size:
        raise EngineLinkError(f"a message of {len(view)} bytes is shorter than its header length")
    (length,) = _LENGTH.unpack_from(view)
    if length > MAX_HEADER_BYTES or _LENGTH.size + length > len(view):
        raise EngineLinkError(f"a header of {length} bytes does not fit the message of {len(view)} bytes")
    try:
        header = json.loads(bytes(view[_LENGTH.size : _LENGTH.size + length]))
    except ValueError as e:
        raise EngineLinkError(f"a header that is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise EngineLinkError(f"a header must be a JSON object, got {type(header).__name__}")
    return header, view[_LENGTH.size + length :]


def _ints(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(type(v) is int and v >= 0 for v in value):
        raise EngineLinkError(f"{what} must be a list of integers >= 0, got {value!r}"[:300])
    return value


def _dtype(name: Any) -> torch.dtype:
    if name not in WIRE_DTYPES:
        raise EngineLinkError(f"unknown dtype {name!r}; the link carries {', '.join(sorted(WIRE_DTYPES))}"[:300])
    return WIRE_DTYPES[name]


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def rules_message(rules: ItemRules) -> dict[str, Any]:
    return {
        "shapes": [
            {
                "graph": s.graph,
                "dtype": _dtype_name(s.dtype),
                "min_shape": list(s.min_shape),
                "max_shape": list(s.max_shape),
                "batch_sizes": list(s.batch_sizes),
            }
            for s in rules.shapes
        ],
        "token_ids": {
            "limit": rules.token_ids.limit,
            "source": rules.token_ids.source,
            "dtypes": sorted(_dtype_name(d) for d in rules.token_ids.dtypes),
        },
    }


def rules_from(header: dict[str, Any]) -> ItemRules:
    shapes_field, token_field = header.get("shapes"), header.get("token_ids")
    if not isinstance(shapes_field, list) or not shapes_field or not isinstance(token_field, dict):
        raise EngineLinkError("the engine's rules need a non-empty 'shapes' list and a 'token_ids' object")
    shapes = []
    for entry in shapes_field:
        if not isinstance(entry, dict) or not isinstance(entry.get("graph"), str):
            raise EngineLinkError(f"a shape entry must be an object with a 'graph' name, got {entry!r}"[:300])
        min_shape, max_shape = _ints(entry.get("min_shape"), "min_shape"), _ints(entry.get("max_shape"), "max_shape")
        sizes = _ints(entry.get("batch_sizes"), "batch_sizes")
        if len(min_shape) != len(max_shape) or not sizes or 0 in sizes:
            raise EngineLinkError(f"shape entry of graph {entry['graph']!r}: mismatched ranks or no batch sizes")
        shapes.append(ItemShape(entry["graph"], _dtype(entry.get("dtype")), min_shape, max_shape, sizes))
    limit = token_field.get("limit")
    if limit is not None and (type(limit) is not int or limit < 1):
        raise EngineLinkError(f"token_ids.limit must be None or an integer >= 1, got {limit!r}"[:300])
    dtypes = frozenset(_dtype(name) for name in token_field.get("dtypes") or [])
    if not dtypes <= INTEGER_DTYPES:
        raise EngineLinkError("token_ids.dtypes must be integer dtypes")
    return ItemRules(shapes, TokenIdRange(limit, str(token_field.get("source", "")), dtypes or TOKEN_DTYPES))


def item_bytes(item: Item) -> bytes:
    if isinstance(item, torch.Tensor):
        return item.contiguous().view(-1).view(torch.uint8).numpy().tobytes()
    return bytes(item) if isinstance(item, bytearray) else item.tobytes()


class RemoteEngine(ItemRules):
    """A front's engine: the item rules the engine sent, and each batch run there. The batcher
    calls run_batch from its one model thread; a lock keeps the link to one batch at a time."""

    def __init__(self, address: str, authkey: bytes, connect_timeout_s: float = 900.0) -> None:
        self.address = address
        self._connection = self._connect(address, authkey, connect_timeout_s)
        header, _ = decode(self._connection.recv_bytes(MAX_HEADER_BYTES + _LENGTH.size))
        rules = rules_from(header)
        super().__init__(rules.shapes, rules.token_ids)
        self._lock = threading.Lock()

    @staticmethod
    def _connect(address: str, authkey: bytes, timeout_s: float) -> Connection:
        """Waits for the engine, which may still be loading (a JIT build compiles first)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return Client(address, family="AF_UNIX", authkey=authkey)
            except (FileNotFoundError, ConnectionRefusedError) as e:
                if time.monotonic() > deadline:
                    raise EngineLinkError(f"no engine answered at {address} within {timeout_s:g} s: {e}") from e
                time.sleep(0.2)

    def run_batch(self, key: Hashable, items: list[Item], padded: int) -> list[list[float]]:
        payloads = [item_bytes(item) for item in items]
        index, shape = key  # type: ignore[misc]
        header = {"key": [index, list(shape)], "padded": padded, "lengths": [len(p) for p in payloads]}
        with self._lock:
            self._connection.send_bytes(encode(header, b"".join(payloads)))
            reply, data = decode(self._connection.recv_bytes(MAX_MESSAGE_BYTES))
        if "error" in reply:
            raise RuntimeError(f"the engine process failed the batch: {reply['error']}")
        rows, dim = reply.get("rows"), reply.get("dim")
        if type(rows) is not int or type(dim) is not int or rows != len(items) or len(data) != rows * dim * 4:
            raise EngineLinkError(f"the engine answered {rows!r} rows of {dim!r} for {len(items)} items")
        values = array.array("f")
        values.frombytes(data)
        if sys.byteorder == "big":  # the wire is little-endian
            values.byteswap()
        return [values[i * dim : (i + 1) * dim].tolist() for i in range(rows)]

    def close(self) -> None:
        self._connection.close()


class EngineServer:
    """Serves one ModuleEngine to the fronts that connect, one thread per front; the batches of
    all fronts run one at a time on the device."""

    def __init__(self, engine: ModuleEngine, address: str, authkey: bytes) -> None:
        self.engine = engine
        self.address = address
        self._authkey = authkey
        self._run_lock = threading.Lock()
        self._rules = encode(rules_message(engine))
        self.batches = 0

    def serve_forever(self) -> None:
        """Accepts fronts until SIGTERM or SIGINT (then returns); the socket file is removed."""
        stop = []

        def on_signal(signum: int, frame: Any) -> None:
            stop.append(signum)
            raise SystemExit(0)

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        # SIGUSR1, which makes a worker log its Stats line, makes the engine log its own (and not end it).
        previous[signal.SIGUSR1] = signal.signal(
            signal.SIGUSR1, lambda *_: logger.info("Stats: %s", json.dumps({"batches": self.batches}))
        )
        listener = Listener(self.address, family="AF_UNIX", authkey=self._authkey)
        logger.info("✅ Engine ready at %s (pid %d)", self.address, os.getpid())
        try:
            while not stop:
                try:
                    connection = listener.accept()
                except (OSError, EOFError, AuthenticationError) as e:  # a client without the key, or gone
                    logger.warning("Engine: a connection was refused: %s: %s", type(e).__name__, e)
                    continue
                threading.Thread(target=self._serve, args=(connection,), daemon=True, name="aitune-engine").start()
        except SystemExit:
            pass
        finally:
            listener.close()
            for s, handler in previous.items():
                signal.signal(s, handler)
            logger.info("Engine stopped after %d batches", self.batches)

    def _serve(self, connection: Connection) -> None:
        try:
            connection.send_bytes(self._rules)
            while True:
                try:
                    message = connection.recv_bytes(MAX_MESSAGE_BYTES)
                except EOFError:
                    return
                connection.send_bytes(self._answer(message))
        except OSError as e:
            logger.warning("Engine: a front's connection ended: %s", e)
        finally:
            connection.close()

    def _answer(self, message: bytes) -> bytes:
        try:
            key, items, padded = self._batch(message)
            with self._run_lock:
                rows = self.engine.output_rows(key, items, padded)
                self.batches += 1
        except Exception as e:  # noqa: BLE001 - the front's requests fail, the engine serves on
            return encode({"error": f"{type(e).__name__}: {e}"[:2000]})
        return encode({"rows": rows.shape[0], "dim": rows.shape[1]}, rows.contiguous().numpy().tobytes())

    def _batch(self, message: bytes) -> tuple[Hashable, list[Item], int]:
        """The batch a front sent, checked against the engine's own rules."""
        header, payload = decode(message)
        key, padded, lengths = header.get("key"), header.get("padded"), _ints(header.get("lengths"), "lengths")
        if not (isinstance(key, list) and len(key) == 2 and type(key[0]) is int):
            raise EngineLinkError(f"'key' must be [graph index, item shape], got {key!r}"[:300])
        index, shape = key[0], tuple(_ints(key[1], "the key's item shape"))
        if not 0 <= index < len(self.engine.shapes) or not self.engine.shapes[index].accepts(shape):
            raise EngineLinkError(f"no served graph {index} accepts items of shape {list(shape)}")
        sizes = self.engine.sizes_for((index, shape))
        if not lengths or type(padded) is not int or padded not in sizes or padded < len(lengths):
            raise EngineLinkError(f"a batch of {len(lengths)} items padded to {padded!r}; tuned sizes {sizes}")
        itemsize = self.engine.shapes[index].dtype.itemsize
        expected = itemsize * math.prod(shape)
        if any(n != expected for n in lengths) or sum(lengths) != len(payload):
            raise EngineLinkError(f"item lengths {lengths[:8]} for {len(payload)} bytes; each must be {expected}")
        dtype = self.engine.shapes[index].dtype
        limit = self.engine.token_ids.limit
        if limit is not None and dtype in self.engine.token_ids.dtypes and len(payload):
            # The fronts check the ids; the engine checks again, once per batch: an id beyond the
            # embedding table would, on CUDA, end this process and every front's requests with it.
            low, high = torch.aminmax(torch.frombuffer(bytearray(payload), dtype=dtype))
            if low < 0 or high >= limit:
                raise EngineLinkError(f"token ids in [{int(low)}, {int(high)}] outside [0, {limit})")
        items: list[Item] = [bytearray(payload[i * expected : (i + 1) * expected]) for i in range(len(lengths))]
        return (index, shape), items, padded
