"""The batch size ait.tune publishes for the calls it drives (docs/reference/recording.md#dynamic-axes).

A context variable, so that a thread or task outside ait.tune sees "unknown" (None), as JIT
recording does.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_batch_size: contextvars.ContextVar[int | None] = contextvars.ContextVar("aitune_batch_size", default=None)


def current_batch_size() -> int | None:
    return _batch_size.get()


@contextlib.contextmanager
def published_batch_size(batch_size: int | None) -> Iterator[None]:
    token = _batch_size.set(batch_size)
    try:
        yield
    finally:
        _batch_size.reset(token)
