"""The forward signature as aitune stores it: (name, kind, has_default) triples (SPEC §2.2)."""

from __future__ import annotations

import functools
import inspect
from typing import Callable

Params = list[tuple[str, int, bool]]

_KIND_NUMBER = {
    inspect.Parameter.POSITIONAL_ONLY: 0,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: 1,
    inspect.Parameter.VAR_POSITIONAL: 2,
    inspect.Parameter.KEYWORD_ONLY: 3,
    inspect.Parameter.VAR_KEYWORD: 4,
}
KIND_NAMES = {number: kind.name for kind, number in _KIND_NUMBER.items()}


def _unwrap(fn: Callable) -> Callable:
    """Follows functools.partial and __wrapped__ chains (e.g. Diffusers' context-parallel
    forwards), stopping at a cycle."""
    seen: set[int] = set()
    while id(fn) not in seen:
        seen.add(id(fn))
        if getattr(fn, "__signature__", None) is not None:
            return fn
        if isinstance(fn, functools.partial):
            return fn  # inspect.signature understands partials directly
        wrapped = getattr(fn, "__wrapped__", None)
        if wrapped is None:
            return fn
        fn = wrapped
    return fn


def forward_params(forward: Callable) -> Params:
    signature = inspect.signature(_unwrap(forward))
    return [
        (p.name, _KIND_NUMBER[p.kind], p.default is not inspect.Parameter.empty) for p in signature.parameters.values()
    ]
