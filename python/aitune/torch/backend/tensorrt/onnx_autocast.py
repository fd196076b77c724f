"""AITune's import path for ModelOpt ONNX autocast settings (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.tensorrt.tensorrt_config import ONNXAutoCastConfig

__all__ = ["ONNXAutoCastConfig"]
