from __future__ import annotations

import dataclasses

from aitune.torch.backend.backend import BackendConfig, ServingOptions
from aitune.torch.backend.common.inductor_settings import InductorSettings


@dataclasses.dataclass
class TorchInductorAotBackendConfig(BackendConfig, ServingOptions, InductorSettings):
    """torch.export + AOTInductor package, served by the native runner
    (docs/reference/backends.md#inductor-aot-torchinductoraotbackend).

    Args:
        inductor_configs: passed to torch._inductor.aoti_compile_and_package(inductor_configs=...).
        use_cuda_graphs: serve through aitune's CUDA-graph runner (docs/reference/dispatch.md#cuda-graph-runner).
        freezing, max_autotune, coordinate_descent_tuning: Inductor's settings of those names, added
            to `inductor_configs` (docs/reference/backends.md#inductor-settings).
    """

    inductor_configs: dict[str, object] | None = None
    use_cuda_graphs: bool = False
    freezing: bool = False
    max_autotune: bool = False
    coordinate_descent_tuning: bool = False

    def __post_init__(self) -> None:
        if self.inductor_configs is not None and not isinstance(self.inductor_configs, dict):
            raise ValueError(f"inductor_configs must be a dict or None, got {self.inductor_configs!r}")
        self.check_inductor_settings(self.inductor_configs, "inductor_configs")

    def merged_inductor_configs(self) -> dict[str, object]:
        """What aoti_compile_and_package gets: `inductor_configs` plus the settings fields that are on."""
        return self.merged_inductor_options(self.inductor_configs) or {}
