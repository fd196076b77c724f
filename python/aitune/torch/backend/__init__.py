"""Backends (docs/reference/api.md#backend-classes): eager, Inductor JIT/AOT, TensorRT, Torch-TensorRT JIT/AOT, ONNX
Runtime and TorchAO. Each constructs without its package; `is_available()` says what is missing."""

from aitune.torch.backend.backend import ArtifactPath, Backend, BackendConfig, BackendState, BuildMode, ExecutionMode
from aitune.torch.backend.onnx_runtime import ONNXExecutionProvider, ONNXRuntimeBackend, ONNXRuntimeBackendConfig
from aitune.torch.backend.torch_eager import TorchEagerBackend, TorchEagerBackendConfig
from aitune.torch.backend.torch_inductor_aot import TorchInductorAotBackend, TorchInductorAotBackendConfig
from aitune.torch.backend.torch_inductor_jit import TorchInductorJitBackend, TorchInductorJitBackendConfig
from aitune.torch.backend.torch_tensorrt_aot import TorchTensorRTAotBackend, TorchTensorRTAotBackendConfig
from aitune.torch.backend.common.torch_tensorrt_config import TorchTensorRTConfig
from aitune.torch.backend.torch_tensorrt_jit import TorchTensorRTJitBackend, TorchTensorRTJitBackendConfig
from aitune.torch.backend.torchao import TorchAOBackend, TorchAOBackendConfig
from aitune.torch.backend.tensorrt import (
    ONNXAutoCastConfig,
    ONNXQuantizationConfig,
    ProfileMode,
    TensorRTBackend,
    TensorRTBackendConfig,
    TensorRTProfile,
    TorchQuantizationConfig,
)

__all__ = [
    "ArtifactPath",
    "Backend",
    "BackendConfig",
    "BackendState",
    "BuildMode",
    "ExecutionMode",
    "ONNXExecutionProvider",
    "ONNXRuntimeBackend",
    "ONNXRuntimeBackendConfig",
    "TorchEagerBackend",
    "TorchEagerBackendConfig",
    "TorchInductorAotBackend",
    "TorchInductorAotBackendConfig",
    "TorchInductorJitBackend",
    "TorchInductorJitBackendConfig",
    "TorchTensorRTAotBackend",
    "TorchTensorRTAotBackendConfig",
    "TorchTensorRTConfig",
    "TorchTensorRTJitBackend",
    "TorchTensorRTJitBackendConfig",
    "TorchAOBackend",
    "TorchAOBackendConfig",
    "ONNXAutoCastConfig",
    "ONNXQuantizationConfig",
    "ProfileMode",
    "TensorRTBackend",
    "TensorRTBackendConfig",
    "TensorRTProfile",
    "TorchQuantizationConfig",
]
