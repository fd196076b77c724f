from aitune.torch.backend.torchao.presets import (
    DEFAULT_QUANTIZATION,
    MXFP8DQ_BLOCK_SIZE_DIVISIBILITY,
    NVFP4DQ_BLOCK_SIZE_DIVISIBILITY,
    QUANTIZATION_PRESETS,
)
from aitune.torch.backend.torchao.quantized_state import SelectedModules
from aitune.torch.backend.torchao.torchao_backend import TorchAOBackend
from aitune.torch.backend.torchao.torchao_config import TorchAOBackendConfig

__all__ = [
    "DEFAULT_QUANTIZATION",
    "MXFP8DQ_BLOCK_SIZE_DIVISIBILITY",
    "NVFP4DQ_BLOCK_SIZE_DIVISIBILITY",
    "QUANTIZATION_PRESETS",
    "SelectedModules",
    "TorchAOBackend",
    "TorchAOBackendConfig",
]
