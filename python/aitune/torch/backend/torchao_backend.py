"""AITune's import path for the TorchAO backend (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.torchao import (
    DEFAULT_QUANTIZATION,
    MXFP8DQ_BLOCK_SIZE_DIVISIBILITY,
    NVFP4DQ_BLOCK_SIZE_DIVISIBILITY,
    TorchAOBackend,
    TorchAOBackendConfig,
)

__all__ = [
    "DEFAULT_QUANTIZATION",
    "MXFP8DQ_BLOCK_SIZE_DIVISIBILITY",
    "NVFP4DQ_BLOCK_SIZE_DIVISIBILITY",
    "TorchAOBackend",
    "TorchAOBackendConfig",
]
