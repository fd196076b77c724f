from __future__ import annotations

import dataclasses
import pickle
from typing import Any

from aitune.torch.backend.backend import BackendConfig, ServingOptions
from aitune.torch.backend.common.torch_tensorrt_config import (
    CompileConfigMixin,
    default_compile_config,
    settings_values,
)


@dataclasses.dataclass
class TorchTensorRTAotBackendConfig(CompileConfigMixin, BackendConfig, ServingOptions):
    """torch.export + torch_tensorrt.dynamo.compile, saved as ``exported_model.pt``
    (docs/reference/backends.md#per-backend-behaviour).

    Args:
        compile_config: Torch-TensorRT settings (``TorchTensorRTConfig`` /
            ``torch_tensorrt.dynamo.CompilationSettings``); the tuning device is added at build
            time and is never stored.
        pickle_protocol: torch_tensorrt.save(pickle_protocol=...) for the saved program.
        use_cuda_graphs: serve through aitune's CUDA-graph runner (docs/reference/dispatch.md#cuda-graph-runner).
    """

    compile_config: Any = dataclasses.field(default_factory=default_compile_config)
    pickle_protocol: int = 5
    use_cuda_graphs: bool = False

    def __post_init__(self) -> None:
        settings_values(self.compile_config)  # raises a TypeError naming the wrong type
        if (
            not isinstance(self.pickle_protocol, int)
            or isinstance(self.pickle_protocol, bool)
            or not 0 <= self.pickle_protocol <= pickle.HIGHEST_PROTOCOL
        ):
            raise ValueError(
                f"pickle_protocol must be an int from 0 to {pickle.HIGHEST_PROTOCOL}, got {self.pickle_protocol!r}"
            )
