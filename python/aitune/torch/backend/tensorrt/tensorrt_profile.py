"""AITune's import path for TensorRT optimization profiles (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.tensorrt.tensorrt_config import TensorRTProfile

__all__ = ["TensorRTProfile"]
