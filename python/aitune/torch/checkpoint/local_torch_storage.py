"""AITune's import path for LocalTorchStorage (docs/guide.md, "Coming from AITune")."""

from aitune.torch.checkpoint.storage import LocalTorchStorage

__all__ = ["LocalTorchStorage"]
