from __future__ import annotations

import dataclasses
from typing import Any

from aitune.torch.backend.backend import BackendConfig, ServingOptions


@dataclasses.dataclass
class TorchInductorAotBackendConfig(BackendConfig, ServingOptions):
    """torch.export + AOTInductor package, served by the native runner
    (docs/reference/backends.md#per-backend-behaviour).

    Args:
        inductor_configs: passed to torch._inductor.aoti_compile_and_package(inductor_configs=...).
        use_cuda_graphs: serve through aitune's CUDA-graph runner (docs/reference/dispatch.md#cuda-graph-runner).
    """

    inductor_configs: dict[str, Any] | None = None
    use_cuda_graphs: bool = False

    def __post_init__(self) -> None:
        if self.inductor_configs is not None and not isinstance(self.inductor_configs, dict):
            raise ValueError(f"inductor_configs must be a dict or None, got {self.inductor_configs!r}")
