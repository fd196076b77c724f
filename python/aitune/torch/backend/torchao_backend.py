"""AITune 0.6 import path, re-exporting aitune's objects (tests/compat/aitune_paths.py; docs/guide.md)."""

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
