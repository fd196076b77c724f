"""AITune 0.6 import path, re-exporting aitune's objects (tests/compat/aitune_paths.py; docs/guide.md)."""

from aitune.torch.graph.dynamic_shapes import BatchDim, DynamicDim, ShapeDefinition

__all__ = ["BatchDim", "DynamicDim", "ShapeDefinition"]
