"""The forward signature as aitune stores it: (name, kind, has_default) triples
(docs/reference/recording.md#binding-flattening-and-names)."""

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
    # A bound method's __wrapped__ (e.g. a forward decorated with @torch.no_grad() or any
    # functools.wraps decorator) is the plain function, whose signature still has `self`:
    # unwrap the function and drop the bound parameter, as inspect.signature does.
    is_method = inspect.ismethod(forward)
    parameters = list(inspect.signature(_unwrap(forward.__func__ if is_method else forward)).parameters.values())
    if (
        is_method
        and parameters
        and parameters[0].kind
        in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
    ):
        parameters = parameters[1:]
    return [(p.name, _KIND_NUMBER[p.kind], p.default is not inspect.Parameter.empty) for p in parameters]
