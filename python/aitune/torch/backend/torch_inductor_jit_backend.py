"""AITune 0.6 import path, re-exporting aitune's objects (tests/compat/aitune_paths.py; docs/guide.md)."""

from aitune.torch.backend.torch_inductor_jit import TorchInductorJitBackend, TorchInductorJitBackendConfig

__all__ = ["TorchInductorJitBackend", "TorchInductorJitBackendConfig"]
