"""Ahead-of-time inspection: find the modules a pipeline executes (``ait.inspect``) and wrap them
(``ait.wrap``)."""

from aitune.torch.inspecting.inspecting import inspect
from aitune.torch.inspecting.module_info import InspectedModule, InspectedModulesInfo, ModuleInfo
from aitune.torch.inspecting.wrapping import wrap

__all__ = ["InspectedModule", "InspectedModulesInfo", "ModuleInfo", "inspect", "wrap"]
