"""TorchEagerBackend: the original module on the tuning device (SPEC §4.2). Also the baseline
that strategies measure other candidates against."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable

import torch

from aitune.torch.backend.backend import Backend
from aitune.torch.backend.torch_eager.torch_eager_config import TorchEagerBackendConfig
from aitune.torch.utils.tensors import cast_floats


def _first_float_dtype(obj: Any) -> torch.dtype | None:
    if isinstance(obj, torch.Tensor):
        return obj.dtype if obj.is_floating_point() else None
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    for v in values:
        found = _first_float_dtype(v)
        if found is not None:
            return found
    return None


class TorchEagerBackend(Backend):
    config_class = TorchEagerBackendConfig

    def __init__(self, config: TorchEagerBackendConfig | None = None, *, tolerance: Any = None) -> None:
        super().__init__(config, tolerance=tolerance)
        self._forward: Callable | None = None
        self._module: torch.nn.Module | None = None
        self._cast_back: torch.dtype | None = None

    @property
    def is_jit(self) -> bool:
        return True  # serves the original module, so its weights must stay (SPEC §3.1)

    @property
    def precision_class(self) -> str:
        if self.config.autocast_enabled:
            dtype = self.config.autocast_dtype or torch.float16
            return "bf16" if dtype == torch.bfloat16 else "fp16"
        return "fp32"

    def _autocast(self) -> contextlib.AbstractContextManager:
        if not self.config.autocast_enabled:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self._device.type, dtype=self.config.autocast_dtype)

    def _build(self, module: torch.nn.Module, graph_spec: Any, data: list, device: torch.device,
               cache_dir: Path) -> None:
        module.to(device)
        self._module = module
        self._forward = getattr(module, "_aitune_original_forward", module.forward)
        if self.config.autocast_enabled and data:
            # Autocast changes output dtypes; callers keep getting what eager returns.
            sample = data[0]
            with torch.no_grad():
                plain = self._forward(*sample.args, **sample.kwargs)
                with self._autocast():
                    mixed = self._forward(*sample.args, **sample.kwargs)
            plain_dtype, mixed_dtype = _first_float_dtype(plain), _first_float_dtype(mixed)
            if plain_dtype is not None and plain_dtype != mixed_dtype:
                self._cast_back = plain_dtype

    def _infer(self, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad(), self._autocast():
            output = self._forward(*args, **kwargs)
        if self._cast_back is not None:
            output = cast_floats(output, self._cast_back)
        return output

    def _activate(self) -> None:
        if self._module is not None and self._device is not None:
            self._module.to(self._device)
