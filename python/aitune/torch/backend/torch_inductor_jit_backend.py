"""AITune's import path for the Inductor JIT backend (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.torch_inductor_jit import TorchInductorJitBackend, TorchInductorJitBackendConfig

__all__ = ["TorchInductorJitBackend", "TorchInductorJitBackendConfig"]
