"""Reading requests: what the served function gets from an OpenAI request (docs/serving.md,
"Requests"). Every problem with a request raises BadRequest, which the worker answers with
HTTP 400 and the message; the worker itself carries on."""

from __future__ import annotations

import binascii
from typing import Any, Mapping

from aitune.dynamo.config import DynamoWorkerConfig

# The field a request's main input is in, by worker type.
PRIMARY_FIELD = {"embedding": "input", "image": "prompt", "video": "prompt"}


class BadRequest(ValueError):
    """A request the worker cannot serve; the message goes back to the client."""


class Request(dict):
    """A request as a `mapping` callable gets it: a dict whose fields also read as attributes
    (`request.input`, `request.nvext.seed`), as AITune's typed requests do, so a mapping written
    for AITune (`lambda req: {"sentences": req.input}`) works unchanged. Nested objects, also
    those in lists, are Requests too."""

    def __init__(self, data: Mapping[str, Any] = ()) -> None:
        super().__init__((key, _view(value)) for key, value in dict(data).items())

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"the request has no field '{name}'") from None


# Values _view leaves as they are; a list of only these is kept as it is, not copied (a list of
# 150k pixel values is checked in C, ~3 ms, where a copy item by item took ~13 ms).
_PLAIN = frozenset((int, float, str, bool, type(None)))


def _view(value: Any) -> Any:
    if isinstance(value, dict):
        return value if isinstance(value, Request) else Request(value)
    if isinstance(value, list):
        if _PLAIN.issuperset(map(type, value)):
            return value
        return [_view(item) for item in value]
    return value


def field(request: Mapping[str, Any], path: str) -> Any:
    """`request[a][b]` for the dotted path "a.b"; BadRequest naming the path when absent."""
    value: Any = request
    for part in path.split("."):
        # A decoded request is made of dicts: `type is dict` first spares the Mapping ABC check
        # (typing's isinstance hook), which a CPU profile showed on every request.
        if not (type(value) is dict or isinstance(value, Mapping)) or part not in value:
            raise BadRequest(f"the request has no field '{path}'")
        value = value[part]
    return value


def call_input(request: Mapping[str, Any], config: DynamoWorkerConfig) -> tuple[tuple, dict]:
    """(args, kwargs) for a plain callable: the modality's main field as the one argument, or
    what `config.mapping` makes of the request (a dict means keyword arguments, a tuple
    positional ones, anything else the one argument)."""
    mapping = config.mapping
    if mapping is None:
        return (field(request, PRIMARY_FIELD[config.type]),), {}
    if isinstance(mapping, Mapping):
        return (), {name: field(request, path) for name, path in mapping.items()}
    try:
        value = mapping(request if isinstance(request, Request) else Request(request))
    except BadRequest:
        raise
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise BadRequest(f"the request could not be mapped to the model's input: {type(e).__name__}: {e}") from e
    if isinstance(value, dict):
        return (), value
    if isinstance(value, tuple):
        return value, {}
    return (value,), {}


# An item sent as its raw values (docs/serving.md, "Requests"): a data URL of base64 bytes, the
# item's values in the graph's dtype, little-endian. One string per item moves through the
# frontend and into the worker far faster than a JSON list of numbers: an image's 150,528 pixel
# values as JSON ints held the path to ~50 requests/s on an H100 machine with no model at all.
RAW_ITEM_PREFIX = "data:application/octet-stream;base64,"


def token_sequences(request: Mapping[str, Any]) -> list[list[int] | bytes]:
    """The `input` of an embedding request served by a tensor model, one entry per item: token
    ids (OpenAI's forms: a list of ints for one item, a list of lists of ints for several), or
    an item's raw bytes (a RAW_ITEM_PREFIX data URL, or a list of them). Text needs a tokenizer,
    so it is refused with the way out."""
    value = field(request, "input")
    if isinstance(value, str):
        return [_raw_item(value, 0)]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [_raw_item(v, i) for i, v in enumerate(value)]
    if not isinstance(value, list) or not value:
        raise BadRequest(f"'input' must be a non-empty list of token ids, got {_kind(value)}")
    if _all_ints(value):
        return [value]
    for i, item in enumerate(value):
        if not isinstance(item, list) or not item or not _all_ints(item):
            raise BadRequest(f"'input[{i}]' must be a non-empty list of token ids (ints), got {_kind(item)}")
    return value


def _raw_item(text: str, position: int) -> bytes:
    if not text.startswith(RAW_ITEM_PREFIX):
        raise BadRequest(
            "this worker serves a tensor model: 'input' must be token ids (a list of ints, or a list of lists of "
            f"ints) or items as raw bytes ('{RAW_ITEM_PREFIX}...'), got text; serve a function that tokenizes "
            "(dynamo_worker(fn, ...)) to accept text"
        )
    try:
        raw = binascii.a2b_base64(text[len(RAW_ITEM_PREFIX) :], strict_mode=True)
    except (binascii.Error, ValueError) as e:
        raise BadRequest(f"'input[{position}]' is not valid base64 after '{RAW_ITEM_PREFIX}': {e}") from e
    if not raw:
        raise BadRequest(f"'input[{position}]' holds no bytes")
    return raw


def embedding_options(request: Mapping[str, Any]) -> tuple[str, int | None]:
    """(encoding_format, dimensions) with OpenAI's rules: "float" or "base64"; dimensions >= 1."""
    encoding = request.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise BadRequest(f"'encoding_format' must be 'float' or 'base64', got {encoding!r}")
    dimensions = request.get("dimensions")
    if dimensions is not None and (not _is_int(dimensions) or dimensions < 1):
        raise BadRequest(f"'dimensions' must be an integer >= 1, got {dimensions!r}")
    return encoding, dimensions


def _all_ints(values: list) -> bool:
    """Every value is an int and none a bool (JSON's true/false), as `_is_int` checks value by
    value, from the set of the values' types: one pass in C instead of two calls per value."""
    types = set(map(type, values))
    return types == _INT or all(issubclass(t, int) and t is not bool for t in types)


_INT = {int}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)}" if value else "an empty list"
    return f"a {type(value).__name__} ({str(value)[:40]!r})"
