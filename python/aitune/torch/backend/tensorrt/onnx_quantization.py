"""AITune's import path for ModelOpt ONNX quantization settings (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.tensorrt.tensorrt_config import ONNXQuantizationConfig

__all__ = ["ONNXQuantizationConfig"]
