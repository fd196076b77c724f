from aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend import TorchInductorAotBackend
from aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_config import TorchInductorAotBackendConfig

__all__ = ["TorchInductorAotBackend", "TorchInductorAotBackendConfig"]
