"""Autocast for backends that run the module's forward (eager, Inductor JIT): callers keep
getting the output dtypes eager returns (docs/reference/backends.md#per-backend-behaviour)."""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable

import torch

from aitune.torch.utils.tensors import cast_floats


class AutocastOptions:
    """Marks a config with autocast options (eager, Inductor JIT, Torch-TensorRT JIT). The config
    dataclass declares the fields itself, in its own field order; this base names them and checks
    the dtype (call check_autocast_options() from __post_init__)."""

    autocast_enabled: bool = False
    autocast_dtype: torch.dtype | None = None

    def check_autocast_options(self) -> None:
        check_autocast_dtype(self.autocast_dtype)


def check_autocast_dtype(value: Any) -> None:
    """Config validation shared by the backends with autocast options."""
    if value is not None and not isinstance(value, torch.dtype):
        raise ValueError(f"autocast_dtype must be a torch.dtype or None, got {value!r}")


def first_float_dtype(obj: Any) -> torch.dtype | None:
    if isinstance(obj, torch.Tensor):
        return obj.dtype if obj.is_floating_point() else None
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    for v in values:
        found = first_float_dtype(v)
        if found is not None:
            return found
    return None


class AutocastMixin:
    """For backends whose config is an AutocastOptions; needs `self._device`."""

    _cast_back: torch.dtype | None = None

    @property
    def precision_class(self) -> str:
        """fp16/bf16 under autocast (torch's default dtype is fp16), else _plain_precision_class()."""
        if self.config.autocast_enabled:
            dtype = self.config.autocast_dtype or torch.float16
            return "bf16" if dtype == torch.bfloat16 else "fp16"
        return self._plain_precision_class()

    def _plain_precision_class(self) -> str:
        return "fp32"

    def _autocast(self) -> contextlib.AbstractContextManager:
        if not self.config.autocast_enabled:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self._device.type, dtype=self.config.autocast_dtype)

    def _detect_cast_back(self, forward: Callable, data: list) -> None:
        """Runs sample 0 with and without autocast; when the output dtype changes, outputs are
        cast back to eager's dtype from then on."""
        if not self.config.autocast_enabled or not data:
            return
        args, kwargs = copy.deepcopy((data[0].args, data[0].kwargs))
        with torch.no_grad():
            plain = forward(*args, **kwargs)
            with self._autocast():
                mixed = forward(*args, **kwargs)
        plain_dtype, mixed_dtype = first_float_dtype(plain), first_float_dtype(mixed)
        if plain_dtype is not None and plain_dtype != mixed_dtype:
            self._cast_back = plain_dtype

    def _cast_output(self, output: Any) -> Any:
        return output if self._cast_back is None else cast_floats(output, self._cast_back)

    def _call_autocast(self, fn: Callable, *args: object, **kwargs: object) -> Any:
        """One serving call: no autograd, autocast when configured, outputs in eager's dtype."""
        with torch.no_grad(), self._autocast():
            output = fn(*args, **kwargs)
        return self._cast_output(output)
