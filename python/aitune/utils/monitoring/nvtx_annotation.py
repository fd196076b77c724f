"""`annotate_with_nvtx(name, color)`: a named NVTX range around a block or each call of a function.
With the `nvtx` package installed the range is in the "AITune" domain and takes `color`, as in
AITune; otherwise torch's NVTX binding marks it (without a colour) when CUDA is available."""

from __future__ import annotations

import functools
import types
from typing import Callable

import torch

NVTX_DOMAIN = "AITune"


def _nvtx_package() -> types.ModuleType | None:
    try:
        import nvtx
    except ImportError:
        return None
    return nvtx


class annotate_with_nvtx:  # noqa: N801 - AITune's name
    def __init__(self, name: str | None = None, color: str | int | None = None) -> None:
        self.name = name
        self.color = color
        self._ranges: list[object | None] = []  # the nvtx package's scopes; None for a torch range

    def __enter__(self) -> annotate_with_nvtx:
        if not self.name:
            raise ValueError("annotate_with_nvtx used as a context manager needs a name; got none")
        nvtx = _nvtx_package()
        if nvtx is not None:
            scope = nvtx.annotate(message=self.name, color=self.color, domain=NVTX_DOMAIN)
            scope.__enter__()
            self._ranges.append(scope)
        elif torch.cuda.is_available():
            torch.cuda.nvtx.range_push(self.name)
            self._ranges.append(None)
        return self

    def __exit__(self, *exc: object) -> bool:
        if self._ranges:
            scope = self._ranges.pop()
            if scope is None:
                torch.cuda.nvtx.range_pop()
            else:
                scope.__exit__(*exc)
        return False

    def __call__(self, func: Callable) -> Callable:
        name = self.name or func.__name__

        @functools.wraps(func)
        def wrapper(*args: object, **kwargs: object) -> object:
            with annotate_with_nvtx(name, self.color):
                return func(*args, **kwargs)

        return wrapper
