"""AITune's import path for TensorRT optimization profiles (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.tensorrt.config import TensorRTProfile

__all__ = ["TensorRTProfile"]
