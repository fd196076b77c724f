"""AITune's import path for the Inductor AOT backend (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.torch_inductor_aot import TorchInductorAotBackend, TorchInductorAotBackendConfig

__all__ = ["TorchInductorAotBackend", "TorchInductorAotBackendConfig"]
