"""AITune's import path for ModelOpt torch quantization settings (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.tensorrt.tensorrt_config import TorchQuantizationConfig

__all__ = ["TorchQuantizationConfig"]
