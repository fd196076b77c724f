from aitune.torch.backend.torch_eager.torch_eager_backend import TorchEagerBackend
from aitune.torch.backend.torch_eager.torch_eager_config import TorchEagerBackendConfig

__all__ = ["TorchEagerBackend", "TorchEagerBackendConfig"]
