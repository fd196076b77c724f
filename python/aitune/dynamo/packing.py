"""Responses per modality (docs/serving.md, "Responses"): what the served function returned,
in the wire format the Dynamo frontend turns into the OpenAI response.

- embedding: a tensor or array [items, dim] (or [dim] for one item), or a list of vectors ->
  OpenAI's embedding list;
- image: bytes (an encoded image), a list of them, or a URL string -> `data: [{b64_json|url}]`;
- video: bytes (an encoded video) or a list of them -> `data: [{output_format, b64_json}]`;
- a dict: passed through as the response, for functions that build it themselves.

A return value of another kind is the served function's fault, not the client's: it raises
TypeError naming what came back and what was expected (HTTP 500, logged by the worker)."""

from __future__ import annotations

import base64
import struct
import time
import uuid
from typing import Any, Sequence

from aitune.dynamo.requests import BadRequest


def embedding_vectors(value: Any) -> list[list[float]]:
    """The vectors in a function's return value, one per item."""
    rows = _to_nested_list(value)
    if rows and all(isinstance(v, (int, float)) for v in rows):
        rows = [rows]  # one vector for one item
    if not rows or not all(isinstance(r, list) and r and all(isinstance(v, (int, float)) for v in r) for r in rows):
        raise TypeError(
            f"an embedding worker's function must return vectors (a tensor or array [items, dim], "
            f"or a list of lists of floats); got {_describe(value)}"
        )
    return [[float(v) for v in r] for r in rows]


def pack_embeddings(
    vectors: Sequence[Sequence[float]],
    model: str,
    encoding_format: str = "float",
    dimensions: int | None = None,
    prompt_tokens: int = 0,
) -> dict[str, Any]:
    """OpenAI's embedding response. `dimensions` keeps the first values of each vector
    (Matryoshka truncation), as OpenAI's parameter does; base64 is little-endian float32. A
    vector is a sequence of numbers (a list of Python floats, as embedding_vectors and the batcher
    give, is used as it is) or a 1-D floating-point tensor."""
    data = []
    for index, vector in enumerate(vectors):
        if dimensions is not None:
            if dimensions > len(vector):
                raise BadRequest(f"'dimensions' is {dimensions} but the model's embeddings have {len(vector)}")
            vector = vector[:dimensions]
        values = _floats(vector)
        if encoding_format == "base64":
            encoded: Any = base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode("ascii")
        else:
            encoded = values
        data.append({"object": "embedding", "embedding": encoded, "index": index})
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }


def pack_images(value: Any, model: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    items = value if isinstance(value, list) else [value]
    data = []
    for item in items:
        if isinstance(item, (bytes, bytearray, memoryview)):
            data.append({"b64_json": base64.b64encode(bytes(item)).decode("ascii")})
        elif isinstance(item, str):
            data.append({"url": item})
        else:
            raise TypeError(
                f"an image worker's function must return encoded image bytes (e.g. PNG), a URL string, "
                f"a list of those, or a response dict; got {_describe(item)}"
            )
    return {"created": int(time.time()), "data": data}


def pack_videos(value: Any, model: str, output_format: str = "mp4") -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    items = value if isinstance(value, list) else [value]
    data = []
    for item in items:
        if not isinstance(item, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"a video worker's function must return encoded video bytes (e.g. MP4), a list of them, "
                f"or a response dict; got {_describe(item)}"
            )
        data.append({"output_format": output_format, "b64_json": base64.b64encode(bytes(item)).decode("ascii")})
    return {
        "id": f"video-{uuid.uuid4().hex}",
        "object": "video",
        "model": model,
        "status": "completed",
        "progress": 100,
        "created": int(time.time()),
        "data": data,
    }


def _floats(vector: Any) -> list[float]:
    """The vector as a list of Python floats. A list that starts with one is taken as it is:
    embedding_vectors' lists and the batcher's rows are made of Python floats, and a copy here
    cost ~10 us per 768-value row on the worker's event loop. A floating-point tensor's tolist()
    is one; anything else is converted value by value."""
    if type(vector) is list and vector and type(vector[0]) is float:
        return vector
    is_floating_point = getattr(vector, "is_floating_point", None)
    if callable(is_floating_point) and is_floating_point():
        return vector.tolist()
    return list(map(float, vector))


def _to_nested_list(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)  # torch tensors and numpy arrays, without importing either
    if callable(tolist) and not isinstance(value, (list, tuple)):
        detach = getattr(value, "detach", None)
        if callable(detach):
            value = detach().float().cpu()
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_to_nested_list(v) for v in value]
    return value


def _describe(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"a {type(value).__name__} of shape {list(shape)}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"
