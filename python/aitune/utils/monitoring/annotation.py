"""`annotate(name, color)`: AITune's one annotation for a function or a block (its examples mark
`@annotate(name="inference", color="green")`). The range appears in NVTX (annotate_with_nvtx) and,
as a `record_function`, in the PyTorch Profiler's trace and in `ait.profile`'s Chrome trace."""

from __future__ import annotations

import functools
from typing import Callable

import torch

from aitune.utils.monitoring.nvtx_annotation import annotate_with_nvtx


class annotate:  # noqa: N801 - AITune's name
    def __init__(self, name: str | None = None, color: str | int | None = None) -> None:
        self.name = name
        self.color = color
        self._scopes: list[tuple[annotate_with_nvtx, torch.profiler.record_function]] = []

    def __enter__(self) -> annotate:
        if not self.name:
            raise ValueError("annotate used as a context manager needs a name; got none")
        nvtx_range = annotate_with_nvtx(self.name, self.color)
        record = torch.profiler.record_function(self.name)
        nvtx_range.__enter__()
        record.__enter__()
        self._scopes.append((nvtx_range, record))
        return self

    def __exit__(self, *exc: object) -> bool:
        nvtx_range, record = self._scopes.pop()
        record.__exit__(*exc)
        nvtx_range.__exit__(*exc)
        return False

    def __call__(self, func: Callable) -> Callable:
        name = self.name or func.__name__

        @functools.wraps(func)
        def wrapper(*args: object, **kwargs: object) -> object:
            with annotate(name, self.color):
                return func(*args, **kwargs)

        return wrapper
