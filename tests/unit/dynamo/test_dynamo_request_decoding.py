"""The fast paths from a request's token ids to the item tensors and from output rows to the
response (docs/serving.md, "Requests"): what they accept and refuse, and the messages, are those
of the value-by-value code they replaced (benchmarks/serving_decode.py times them)."""

from __future__ import annotations

import base64
import enum
import struct

import pytest
import torch

from aitune.dynamo import DynamoWorkerConfig
from aitune.dynamo.module_engine import ItemShape, ModuleEngine, TokenIdRange, as_tensor, batch_tensor, ids_buffer
from aitune.dynamo.packing import pack_embeddings
from aitune.dynamo.requests import RAW_ITEM_PREFIX, BadRequest, Request, call_input, token_sequences
from aitune.dynamo.worker import FunctionWorker


def ids_tensor(ids: list[int], dtype: torch.dtype) -> torch.Tensor:
    """The item the worker makes of `ids`, as the tensor the model thread makes of it."""
    return as_tensor(ids_buffer(ids, dtype), dtype)


class Token(enum.IntEnum):
    CLS = 101


@pytest.mark.parametrize(
    "value, message",
    [
        ([1, True, 3], r"'input\[0\]' must be a non-empty list of token ids \(ints\), got a int \('1'\)"),
        ([1, 2, 0.5], r"'input\[0\]' must be a non-empty list of token ids \(ints\), got a int \('1'\)"),
        ([1, "2"], r"'input\[0\]' must be a non-empty list of token ids \(ints\), got a int \('1'\)"),
        ([False], r"'input\[0\]' must be a non-empty list of token ids \(ints\), got a bool \('False'\)"),
        ([[1, 2], [3, False]], r"'input\[1\]' must be a non-empty list of token ids \(ints\), got a list of 2"),
        ([[1, 2], [3.0, 4]], r"'input\[1\]' must be a non-empty list of token ids \(ints\), got a list of 2"),
        ([[1, 2], [None]], r"'input\[1\]' must be a non-empty list of token ids \(ints\), got a list of 1"),
        ([[1], 2], r"'input\[1\]' must be a non-empty list of token ids \(ints\), got a int \('2'\)"),
    ],
)
def test_token_ids_refuse_bools_floats_and_text_with_the_same_messages(value, message):
    with pytest.raises(BadRequest, match=message):
        token_sequences({"input": value})


def test_token_ids_are_the_requests_own_lists_and_int_subclasses_still_pass():
    ids = list(range(3 * 224 * 224))
    request = {"input": ids}
    assert token_sequences(request)[0] is ids, "no copy of the request's ids"
    nested = {"input": [[1, 2], [3, 4]]}
    assert token_sequences(nested) == [[1, 2], [3, 4]] and token_sequences(nested)[1] is nested["input"][1]
    assert token_sequences({"input": [Token.CLS, 7]}) == [[101, 7]]
    assert token_sequences({"input": [2**70]}) == [[2**70]], "an int; the tensor's dtype decides the range"


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.float16])
def test_ids_tensor_equals_torch_tensor(dtype):
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    low, high = max(int(info.min), -5000), min(int(info.max), 5000)
    ids = torch.randint(low, high + 1, (3 * 32 * 32,), generator=torch.Generator().manual_seed(0)).tolist()
    ids += [low, high, Token.CLS]
    fast, reference = ids_tensor(ids, dtype), torch.tensor(ids, dtype=dtype)
    assert fast.dtype == dtype and fast.shape == reference.shape
    assert torch.equal(fast, reference)
    assert torch.equal(ids_tensor([], torch.int64), torch.tensor([], dtype=torch.int64))


def test_ids_tensor_refuses_and_wraps_as_torch_tensor_does():
    with pytest.raises(RuntimeError, match="value cannot be converted to type uint8 without overflow"):
        ids_tensor([1, 256], torch.uint8)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int32 without overflow"):
        ids_tensor([2**31], torch.int32)
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        ids_tensor([2**63], torch.int64)
    assert ids_tensor([-1, 3], torch.uint8).tolist() == [255, 3], "torch's wrap-around, as before"


def _engine(dtype: torch.dtype, length: int) -> ModuleEngine:
    engine = ModuleEngine.__new__(ModuleEngine)  # the item shapes only
    engine.shapes = [ItemShape("g", dtype, [length], [length], [1, 2, 4])]
    engine.device = torch.device("cpu")
    engine.token_ids = TokenIdRange(None, "not checked here")
    return engine


def test_item_tensors_out_of_range_are_bad_requests():
    engine = _engine(torch.int64, 3)
    key, item = engine.item([1, 2, 3], 0)
    tensor = as_tensor(item, torch.int64)
    assert key == (0, (3,)) and tensor.dtype == torch.int64 and tensor.tolist() == [1, 2, 3]
    assert not isinstance(item, torch.Tensor), "an integer item is a C buffer: no torch call on the event loop"
    with pytest.raises(BadRequest, match=r"'input\[1\]' cannot be a torch.int64 tensor: Overflow"):
        engine.item([1, 2, 2**63], 1)
    with pytest.raises(BadRequest, match=r"'input\[0\]' cannot be a torch.uint8 tensor: value cannot be converted"):
        _engine(torch.uint8, 2).item([7, 300], 0)


def test_a_tuned_module_worker_reads_the_request_as_it_came_and_a_callable_gets_a_request():
    tuned = FunctionWorker(lambda x: x, DynamoWorkerConfig(type="embedding", model_path="m"))
    tuned.engine = _engine(torch.int64, 3)
    request = {"input": [1, 2, 3], "nvext": {"seed": 1}}
    assert tuned.request_view(request) is request
    plain = FunctionWorker(lambda x: x, DynamoWorkerConfig(type="embedding", model_path="m"))
    viewed = plain.request_view({"input": [{"text": "a"}], "ids": [1, 2], "nvext": {"seed": 1}})
    assert isinstance(viewed, Request) and viewed.nvext.seed == 1 and viewed.input[0].text == "a"
    config = DynamoWorkerConfig(type="embedding", model_path="m", mapping=lambda r: r.ids)
    assert call_input(viewed, config) == (([1, 2],), {})


def test_scalar_lists_are_kept_as_they_are_in_a_request_view():
    pixels = list(range(1000))
    request = Request({"input": pixels, "mixed": [1, "a", None, 2.5, True], "deep": [[1], {"a": [2]}]})
    assert request.input is pixels and request.mixed == [1, "a", None, 2.5, True]
    assert request.deep[0] == [1] and request.deep[1].a == [2]


def test_embeddings_pack_tensor_rows_as_their_float_lists():
    rows = [torch.tensor([0.25, -1.5, 3.0]), torch.tensor([1.0, 2.0, 4.0])]
    as_lists = [r.tolist() for r in rows]
    for encoding in ("float", "base64"):
        for dimensions in (None, 2):
            assert pack_embeddings(rows, "m", encoding, dimensions) == pack_embeddings(
                as_lists, "m", encoding, dimensions
            )
    packed = pack_embeddings(rows, "m")["data"][0]["embedding"]
    assert packed == [0.25, -1.5, 3.0] and all(type(v) is float for v in packed)
    assert pack_embeddings([[1, 2]], "m")["data"][0]["embedding"] == [1.0, 2.0]
    assert all(type(v) is float for v in pack_embeddings([[1, 2]], "m")["data"][0]["embedding"])
    encoded = pack_embeddings([torch.tensor([1, 2], dtype=torch.int32)], "m", "base64")["data"][0]["embedding"]
    assert struct.unpack("<2f", base64.b64decode(encoded)) == (1.0, 2.0)


def test_a_batch_joins_the_items_buffers_and_pads_with_the_last():
    engine = _engine(torch.int32, 3)
    items = [engine.item([1, 2, 3], 0)[1], engine.item([4, 5, 6], 1)[1]]
    assert batch_tensor(items, 4, torch.int32).tolist() == [[1, 2, 3], [4, 5, 6], [4, 5, 6], [4, 5, 6]]
    # A tensor item (torch.tensor's uint8 wrap-around, no range check) joins buffers through torch.stack.
    wrapped = _engine(torch.uint8, 3).item([-1, 0, 1], 0)[1]
    assert isinstance(wrapped, torch.Tensor)
    mixed = batch_tensor([bytearray([7, 8, 9]), wrapped], 2, torch.uint8)
    assert mixed.dtype == torch.uint8 and mixed.tolist() == [[7, 8, 9], [255, 0, 1]]


def _raw(data: bytes) -> str:
    return RAW_ITEM_PREFIX + base64.b64encode(data).decode()


def test_raw_items_decode_to_the_values_the_same_ids_give():
    ids = [101, 7, 2**40, 0]
    raw = struct.pack("<4q", *ids)
    assert token_sequences({"input": _raw(raw)}) == [raw]
    assert token_sequences({"input": [_raw(raw), _raw(raw[:8])]}) == [raw, raw[:8]]
    engine = _engine(torch.int64, 4)
    key, item = engine.item(raw, 0)
    assert key == engine.item(ids, 0)[0] == (0, (4,)) and as_tensor(item, torch.int64).tolist() == ids
    pixels = bytes(range(256)) * 3
    key, item = _engine(torch.uint8, 768).item(pixels, 0)
    assert key == (0, (768,)) and bytes(item) == pixels
    with pytest.raises(BadRequest, match=r"'input\[2\]' has 12 bytes; the tuned model accepts item shapes \[4\]"):
        engine.item(raw[:12], 2)
    with pytest.raises(
        BadRequest, match=r"raw bytes for torch.int16, torch.int32, torch.int64, torch.int8, torch.uint8"
    ):
        _engine(torch.float32, 1).item(struct.pack("<f", 0.5), 0)


@pytest.mark.parametrize(
    "value, message",
    [
        (RAW_ITEM_PREFIX + "AAE=x", r"'input\[0\]' is not valid base64"),
        (RAW_ITEM_PREFIX, r"'input\[0\]' holds no bytes"),
        ("hello", r"got text; serve a function that tokenizes"),
        ([_raw(b"12345678"), "hello"], r"got text"),
    ],
)
def test_raw_items_refused_with_the_reason(value, message):
    with pytest.raises(BadRequest, match=message):
        token_sequences({"input": value})
