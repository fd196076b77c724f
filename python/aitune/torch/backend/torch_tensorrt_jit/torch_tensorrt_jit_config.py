from __future__ import annotations

import dataclasses

import torch

from aitune.torch.backend.common.autocast import AutocastOptions
from aitune.torch.backend.backend import BackendConfig, ServingOptions
from aitune.torch.backend.common.torch_tensorrt_config import (
    CompileConfigMixin,
    TorchTensorRTConfig,
    default_compile_config,
    settings_values,
)


@dataclasses.dataclass
class TorchTensorRTJitBackendConfig(CompileConfigMixin, BackendConfig, ServingOptions, AutocastOptions):
    """torch.compile(backend="torch_tensorrt") (docs/reference/backends.md#per-backend-behaviour).

    Args:
        compile_config: Torch-TensorRT settings (``TorchTensorRTConfig`` /
            ``torch_tensorrt.dynamo.CompilationSettings``); the tuning device is added at build
            time and is never stored.
        fullgraph: torch.compile(fullgraph=...): graph breaks become errors.
        dynamic: torch.compile(dynamic=...): True compiles dynamic engines up front, False
            always specialises, None lets Dynamo detect dynamic axes and recompile.
        autocast_enabled: compile and run under torch.autocast.
        autocast_dtype: autocast dtype (None: torch's default for the device).
        use_cuda_graphs: serve through aitune's CUDA-graph runner (docs/reference/dispatch.md#cuda-graph-runner).
    """

    compile_config: TorchTensorRTConfig = dataclasses.field(default_factory=default_compile_config)
    fullgraph: bool = False
    dynamic: bool | None = None
    autocast_enabled: bool = False
    autocast_dtype: torch.dtype | None = None
    use_cuda_graphs: bool = False

    def __post_init__(self) -> None:
        settings_values(self.compile_config)  # raises a TypeError naming the wrong type
        if self.dynamic is not None and not isinstance(self.dynamic, bool):
            raise ValueError(f"dynamic must be True, False or None, got {self.dynamic!r}")
        self.check_autocast_options()
