"""Graph specs: the recorded description of one graph of a module (docs/design.md#glossary,
docs/reference/recording.md)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Mapping

import torch
from tabulate import tabulate

from aitune._native import _C
from aitune.torch.graph.locator import SemanticPath, access_path, semantic_path, tensor_name

if TYPE_CHECKING:
    from aitune.torch.graph.dynamic_shapes import InputPath, ShapeDefinition


@dataclasses.dataclass
class TensorLeaf:
    """A tensor input or output: its paths and the shape lattice."""

    semantic_path: SemanticPath
    access_path: str
    spec: _C.TensorSpec
    dtypes: list[torch.dtype]  # every dtype seen, first is the spec's dtype

    @property
    def name(self) -> str:
        return tensor_name(self.semantic_path, "output" if self.access_path.startswith("output") else "input")


@dataclasses.dataclass
class ConstantLeaf:
    semantic_path: SemanticPath
    access_path: str
    value: object
    needs_eq: bool = False  # the graph key summarises it by type only; the dispatcher compares it


class TensorsSpec:
    """The leaves of one side (inputs or outputs) of a graph, in flattening order."""

    def __init__(self, is_output: bool) -> None:
        self.is_output = is_output
        self.leaves: list[TensorLeaf | ConstantLeaf] = []

    @property
    def tensors(self) -> list[TensorLeaf]:
        return [leaf for leaf in self.leaves if isinstance(leaf, TensorLeaf)]

    @property
    def constants(self) -> list[ConstantLeaf]:
        return [leaf for leaf in self.leaves if isinstance(leaf, ConstantLeaf)]

    @classmethod
    def from_flat(cls, flat_leaves: list[_C.Leaf], batch_size: int | None, is_output: bool) -> TensorsSpec:
        spec = cls(is_output)
        root = "output" if is_output else None
        for flat in flat_leaves:
            value = flat.value
            path = semantic_path(flat.path) if flat.path else ()
            display = access_path(flat.path, root)
            if flat.is_tensor:
                spec.leaves.append(
                    TensorLeaf(
                        path,
                        display,
                        _C.TensorSpec.from_sample(
                            list(value.shape), str(value.dtype).removeprefix("torch."), batch_size
                        ),
                        [value.dtype],
                    )
                )
            else:
                spec.leaves.append(ConstantLeaf(path, display, value, flat.needs_eq))
        return spec

    def update(self, flat_leaves: list[_C.Leaf], batch_size: int | None) -> list[str]:
        """Widens every tensor's lattice with a new sample of the same graph. Returns warnings
        (e.g. a dtype that differs from the first sample's)."""
        warnings = []
        for leaf, flat in zip(self.leaves, flat_leaves):
            if not flat.is_tensor or not isinstance(leaf, TensorLeaf):
                continue
            value = flat.value
            leaf.spec.update(list(value.shape), batch_size)
            if value.dtype not in leaf.dtypes:
                leaf.dtypes.append(value.dtype)
                warnings.append(
                    f"{leaf.access_path} was recorded as {leaf.dtypes[0]} and now as {value.dtype}; "
                    "both dtypes will be accepted"
                )
        return warnings

    def has_batch_axis(self) -> bool:
        tensors = self.tensors
        return bool(tensors) and all(t.spec.has_batch_axis() for t in tensors)

    def has_dynamic_axis(self) -> bool:
        return any(t.spec.has_dynamic_axis() for t in self.tensors)

    def max_batch_size(self) -> int:
        sizes = [t.spec.max_batch_size() for t in self.tensors if t.spec.has_batch_axis()]
        return max(sizes) if sizes else 1

    def table(self) -> str:
        """The spec table of docs/reference/recording.md#binding-flattening-and-names (Tensors, then Other when there
        are constants)."""
        rows = [
            [
                t.access_path,
                str(t.semantic_path),
                str(t.spec.shape),
                str(t.spec.min_shape),
                str(t.spec.max_shape),
                str(t.dtypes[0]) if len(t.dtypes) == 1 else ", ".join(map(str, t.dtypes)),
            ]
            for t in self.tensors
        ]
        text = " Tensors:\n" + tabulate(
            rows,
            headers=["Access Path", "Semantic Path", "Shape", "Min Shape", "Max Shape", "Dtype"],
            tablefmt="fancy_grid",
        )
        if self.constants:
            other = [[c.access_path, str(c.semantic_path), repr(c.value)] for c in self.constants]
            text += "\n Other:\n" + tabulate(
                other, headers=["Access Path", "Semantic Path", "Value"], tablefmt="fancy_grid"
            )
        return text

    def describe_structure(self) -> str:
        """The leaves on one line, for error messages: "Tensors: x: [2, 3] torch.float32; Other: scale=2.0"."""
        tensors = ", ".join(f"{t.access_path}: {t.spec.shape} {t.dtypes[0]}" for t in self.tensors)
        text = f"Tensors: {tensors or '(none)'}"
        if self.constants:
            text += "; Other: " + ", ".join(f"{c.access_path}={c.value!r}" for c in self.constants)
        return text


@dataclasses.dataclass
class Sample:
    """One recorded call: canonical (args, kwargs), already deep-copied, and its batch size."""

    args: tuple
    kwargs: dict
    batch_size: int | None

    def __iter__(self):
        """`args, kwargs = sample`: AITune's samples are (args, kwargs) pairs, and backends written
        for AITune unpack them (docs/guide.md, "Coming from AITune")."""
        return iter((self.args, self.kwargs))


class GraphSpec:
    """One graph of a module: name, structure key, input and output specs, samples."""

    def __init__(
        self,
        name: str,
        key: _C.GraphKey,
        inputs: TensorsSpec,
        outputs: TensorsSpec,
        forward_params: list,
        dynamic_shapes: Mapping[InputPath, ShapeDefinition] | None = None,
        llm_phase: str | None = None,
    ) -> None:
        self.name = name
        self.key = key
        self.input_spec = inputs
        self.output_spec = outputs
        self.forward_params = forward_params
        self.dynamic_shapes = dynamic_shapes
        self.llm_phase = llm_phase
        self.samples: list[Sample] = []
        self.reference_outputs: list[object] = []  # eager outputs of the samples (host), set when tuning
        self.num_calls = 0
        # The batch sizes ait.tune published for the calls recorded here (the caller's batch_sizes
        # that reached this graph): the FirstWins gate measures at these. Empty in JIT mode.
        self.observed_batch_sizes: list[int] = []

    @property
    def display_name(self) -> str:
        return self.name if self.llm_phase is None else f"{self.name} (LLM phase {self.llm_phase})"

    def has_batch_axis(self) -> bool:
        return self.input_spec.has_batch_axis()

    def max_batch_size(self) -> int:
        return self.input_spec.max_batch_size()

    def describe(self) -> str:
        return (
            "graph_spec:\n  input_spec:\n" + self.input_spec.table() + "\n  output_spec:\n" + self.output_spec.table()
        )

    def __repr__(self) -> str:
        return f"GraphSpec(name={self.name!r}, inputs=[{self.input_spec.describe_structure()}])"


def resize_to(tensor: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """Resizes every axis to `shape` by slicing when longer and repeating the first row when
    shorter (make_batch in docs/reference/recording.md#dynamic-axes;
    min/max runs in docs/reference/validation.md#structural-checks)."""
    out = tensor
    for axis, size in enumerate(shape):
        current = out.shape[axis]
        if current == size:
            continue
        if current > size:
            out = out.narrow(axis, 0, size)
        else:
            first = out.narrow(axis, 0, 1)
            reps = [1] * out.dim()
            reps[axis] = size
            out = first.repeat(*reps)
    return out.contiguous()


def values_equal(a: object, b: object) -> bool:
    """== for graph identity (docs/reference/recording.md#graph-identity): element-wise results (numpy arrays) count as
    equal only when all elements are; a comparison that raises means "different"."""
    try:
        result = a == b
        if isinstance(result, bool):
            return result
        if hasattr(result, "all"):
            return bool(result.all()) and getattr(a, "shape", None) == getattr(b, "shape", None)
        return bool(result)
    except Exception:  # noqa: BLE001 - an incomparable value is a different value
        return False
