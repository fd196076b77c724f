from aitune.torch.backend.torch_inductor_jit.torch_inductor_jit_backend import TorchInductorJitBackend
from aitune.torch.backend.torch_inductor_jit.torch_inductor_jit_config import TorchInductorJitBackendConfig

__all__ = ["TorchInductorJitBackend", "TorchInductorJitBackendConfig"]
