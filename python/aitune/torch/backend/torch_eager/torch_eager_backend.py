"""TorchEagerBackend: the original module on the tuning device (docs/reference/backends.md#per-backend-behaviour). Also
the baseline that strategies measure other candidates against."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from aitune.torch.backend.common.jit_warmup import original_forward
from aitune.torch.backend.common.autocast import AutocastMixin
from aitune.torch.backend.backend import Backend
from aitune.torch.backend.registry import register_backend
from aitune.torch.backend.torch_eager.torch_eager_config import TorchEagerBackendConfig
from aitune.torch.validation import NumericTolerance
from aitune.torch.graph.graph_spec import GraphSpec


@register_backend("torch_eager")
class TorchEagerBackend(AutocastMixin, Backend):
    config_class = TorchEagerBackendConfig
    _build_cost = 0.1  # a copy of the module: nothing compiles

    def __init__(
        self, config: TorchEagerBackendConfig | None = None, *, tolerance: NumericTolerance | None = None
    ) -> None:
        super().__init__(config, tolerance=tolerance)
        self._forward: Callable | None = None
        self._module: torch.nn.Module | None = None
        self._cast_back: torch.dtype | None = None

    @property
    def is_jit(self) -> bool:
        return True  # serves the original module, so its weights must stay (docs/reference/tuning.md#the-tune-call)

    def _build(
        self, module: torch.nn.Module, graph_spec: GraphSpec, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        module.to(device)
        self._module = module
        self._forward = original_forward(module)
        self._detect_cast_back(self._forward, data)

    def _infer(self, *args: object, **kwargs: object) -> object:
        return self._call_autocast(self._forward, *args, **kwargs)

    def _activate(self) -> None:
        if self._module is not None and self._device is not None:
            self._module.to(self._device)
