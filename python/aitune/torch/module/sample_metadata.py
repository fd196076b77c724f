"""AITune's `SampleMetadata` (docs/guide.md, "Coming from AITune"): the tensors (and, strict, the
other values) of one call's inputs or of its output, each with its paths and a TensorSpec; the
walkthrough in AITune's execution-graphs guide runs on it. The flattening is aitune's own (the
native walker and graph/locator.py's rules), so the paths are those aitune's graphs use."""

from __future__ import annotations

import copy
import dataclasses

import torch
from tabulate import tabulate

from aitune._native import _C
from aitune.torch.graph.graph_spec import resize_to
from aitune.torch.graph.locator import SemanticPath, access_path, semantic_path
from aitune.torch.graph.tree import map_tensors
from aitune.torch.module.tensor_spec import InfoLevel, TensorSpec

__all__ = ["InfoLevel", "LeafLocator", "SampleMetadata"]

_KEYWORD = 3  # graph/signature.py: inspect.Parameter.KEYWORD_ONLY


@dataclasses.dataclass(frozen=True)
class LeafLocator:
    """Where a leaf is: `display_path` (`values[3]["t"]`) and `path`, its semantic key (`("values", 3, "t")`)."""

    display_path: str
    path: SemanticPath


def _key_tuple(path: SemanticPath) -> tuple:
    return path if isinstance(path, tuple) else (path,)


class SampleMetadata:
    """Build with `from_inputs` (a dict keyed by forward parameter) or `from_outputs`."""

    def __init__(
        self, tensor_data: list[tuple[LeafLocator, TensorSpec]], other_data: list[tuple[LeafLocator, object]]
    ) -> None:
        self._tensor_data = tensor_data
        self._other_data = other_data

    @staticmethod
    def _from_leaves(leaves: list[_C.Leaf], root: str | None, strict: bool, batch_size: int | None) -> SampleMetadata:
        tensors, others = [], []
        for flat in leaves:
            steps, value, is_tensor = flat.path, flat.value, flat.is_tensor
            locator = LeafLocator(access_path(steps, root), semantic_path(steps) if steps else ())
            if is_tensor:
                tensors.append((locator, TensorSpec.from_tensor(value, batch_size)))
            elif strict:
                others.append((locator, value))
        return SampleMetadata(tensors, others)

    @staticmethod
    def from_inputs(inputs: dict[str, object], strict: bool = False, batch_size: int | None = None) -> SampleMetadata:
        """`strict` also keeps the values that are not tensors (the "Other" table)."""
        if not isinstance(inputs, dict):
            raise TypeError(
                f"SampleMetadata.from_inputs needs a dict keyed by forward parameter name; got {type(inputs).__name__}"
            )
        signature = _C.Signature([(str(name), _KEYWORD, False) for name in inputs])
        _, leaves = _C.flatten_call(signature, (), {str(k): v for k, v in inputs.items()}, strict, -1)
        return SampleMetadata._from_leaves(leaves, None, strict, batch_size)

    @staticmethod
    def from_outputs(output: object, strict: bool = False, batch_size: int | None = None) -> SampleMetadata:
        _, leaves = _C.flatten_value(output)
        return SampleMetadata._from_leaves(leaves, "output", strict, batch_size)

    @property
    def tensor_data(self) -> tuple[tuple[LeafLocator, TensorSpec], ...]:
        return tuple(self._tensor_data)

    @property
    def other_data(self) -> tuple[tuple[LeafLocator, object], ...]:
        return tuple(self._other_data)

    @property
    def tensor_specs(self) -> list[TensorSpec]:
        return [spec for _, spec in self._tensor_data]

    @property
    def detected_dynamic_axis(self) -> bool:
        return any(spec.has_dynamic_axis() for spec in self.tensor_specs)

    def has_batch_axis(self) -> bool:
        return all(spec.has_batch_axis() for spec in self.tensor_specs)

    def update_shapes_seen(self, other: SampleMetadata) -> None:
        """Widens every tensor's lattice with `other`'s (the same tensors, from another sample)."""
        mine = [locator.path for locator, _ in self._tensor_data]
        theirs = [locator.path for locator, _ in other._tensor_data]
        if mine != theirs:
            raise ValueError(
                f"SampleMetadata.update_shapes_seen: the other sample has tensors {theirs}; expected {mine}"
            )
        for (_, spec), (_, other_spec) in zip(self._tensor_data, other._tensor_data):
            spec.update_shapes_seen(other_spec)

    def make_batch(self, inputs: dict[str, object], batch_size: int) -> dict[str, object]:
        """A copy of `inputs` with every tensor's batch axes resized to `batch_size` (rows sliced
        off, or the first row repeated)."""
        specs = {_key_tuple(locator.path): spec for locator, spec in self._tensor_data}

        def resize(path: tuple, tensor: torch.Tensor) -> torch.Tensor:
            spec = specs.get(path)
            if spec is None or not spec.has_batch_axis():
                return tensor
            return resize_to(tensor, spec.batched_shape(list(tensor.shape), batch_size))

        return map_tensors(copy.copy(inputs), resize)

    def describe(self, info_level: InfoLevel = InfoLevel.FULL) -> str:
        if info_level is InfoLevel.SHORT:
            text = "Tensors: " + ", ".join(locator.display_path for locator, _ in self._tensor_data)
            if self._other_data:
                text += " Others: " + ", ".join(f"{loc.display_path}={value}" for loc, value in self._other_data)
            return text
        full = info_level is InfoLevel.FULL
        headers = ["Access Path", "Semantic Path", "Shape"] + (["Min Shape", "Max Shape", "Dtype"] if full else [])
        rows = [
            [loc.display_path, str(loc.path), spec.shape]
            + ([spec.min_shape, spec.max_shape, spec.dtype] if full else [])
            for loc, spec in self._tensor_data
        ]
        table_format = "fancy_grid" if full else "simple"
        text = "Tensors:\n" + tabulate(rows, headers=headers, tablefmt=table_format) + "\n"
        if self._other_data:
            others = [[loc.display_path, str(loc.path), str(value)] for loc, value in self._other_data]
            text += "Other:\n" + tabulate(
                others, headers=["Access Path", "Semantic Path", "Value"], tablefmt=table_format
            )
            text += "\n"
        return text

    def __repr__(self) -> str:
        return self.describe(InfoLevel.FULL)
