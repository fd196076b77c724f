"""AITune's import path for the module wrapper (docs/guide.md, "Coming from AITune"): scripts
written for AITune import `Module` and `ModuleState` from here."""

from aitune.torch.module.state import ModuleState
from aitune.torch.module.wrapper import Module

__all__ = ["Module", "ModuleState"]
