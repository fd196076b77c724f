"""AITune 0.6 import path, re-exporting aitune's objects (tests/compat/aitune_paths.py; docs/guide.md)."""

from aitune.torch.module.state import ModuleState
from aitune.torch.module.wrapper import Module

__all__ = ["Module", "ModuleState"]
