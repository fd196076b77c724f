from __future__ import annotations

import dataclasses

import torch

from aitune.torch.backend.common.autocast import AutocastOptions
from aitune.torch.backend.backend import BackendConfig, ServingOptions


@dataclasses.dataclass
class TorchEagerBackendConfig(BackendConfig, ServingOptions, AutocastOptions):
    """Eager PyTorch, optionally under autocast (docs/reference/backends.md#per-backend-behaviour)."""

    autocast_enabled: bool = False
    autocast_dtype: torch.dtype | None = None
    use_cuda_graphs: bool = False

    def __post_init__(self) -> None:
        self.check_autocast_options()
