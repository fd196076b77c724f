from __future__ import annotations

import dataclasses

import torch

from aitune.torch.backend.backend import BackendConfig


@dataclasses.dataclass
class TorchEagerBackendConfig(BackendConfig):
    """Eager PyTorch, optionally under autocast (SPEC §4.2)."""

    autocast_enabled: bool = False
    autocast_dtype: torch.dtype | None = None
    use_cuda_graphs: bool = False

    def __post_init__(self) -> None:
        if self.autocast_dtype is not None and not isinstance(self.autocast_dtype, torch.dtype):
            raise ValueError(f"autocast_dtype must be a torch.dtype or None, got {self.autocast_dtype!r}")

    @classmethod
    def from_dict(cls, data: dict) -> TorchEagerBackendConfig:
        data = dict(data)
        if isinstance(data.get("autocast_dtype"), str):
            data["autocast_dtype"] = getattr(torch, data["autocast_dtype"].removeprefix("torch."))
        return cls(**data)
