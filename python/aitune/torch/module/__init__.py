from aitune.torch.graph.graph_spec import ConstantLeaf, GraphSpec, Sample, TensorLeaf, TensorsSpec
from aitune.torch.graph.locator import Locator
from aitune.torch.module.state import ModuleState
from aitune.torch.module.wrapper import Module

from aitune._native import _C

TensorSpec = _C.TensorSpec
SampleMetadata = TensorsSpec  # the reference's name for a graph's input or output description

__all__ = [
    "SampleMetadata",
    "TensorSpec",
    "ConstantLeaf",
    "GraphSpec",
    "Locator",
    "Module",
    "ModuleState",
    "Sample",
    "TensorLeaf",
    "TensorsSpec",
]
