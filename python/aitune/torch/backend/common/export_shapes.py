"""torch.export shape helpers shared by the exporting backends (docs/reference/backends.md#per-backend-behaviour).

* :func:`build_dynamic_shapes` turns a graph's recorded lattice into torch.export's
  ``dynamic_shapes``: one shared ``Dim("batch", min, max)`` over every batch axis (times the
  axis' multiplier), ``Dim.AUTO`` for ``dim`` axes, and named dims for the axes the user declared
  with ``DynamicDim`` / ``BatchDim`` (docs/reference/recording.md#explicit-dynamic-shapes).
* :func:`prepare_export_sample` is the sample torch.export traces: sample 0 re-batched to 2 when
  the graph's max batch is at least 2, and every size-1 dynamic axis widened to 2, so that
  export does not specialise those axes to 0/1.

Both address tensors by semantic path (docs/reference/recording.md#binding-flattening-and-names) and build their result
from the call bound to the forward signature, so the ``dynamic_shapes`` dict is keyed by parameter name, like the
forward torch.export sees.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch

from aitune._native import _C
from aitune.torch.graph.dynamic_shapes import BatchDim, DynamicDim
from aitune.torch.graph.graph_spec import GraphSpec, Sample, TensorLeaf, resize_to
from aitune.torch.graph.locator import Locator
from aitune.torch.graph.tree import canonical_call, map_tensors

USER_TYPE_ERROR = "Dynamic shapes does not support user types or dataclasses."
BATCH_DIM_NAME = "batch"
EXPORT_BATCH_SIZE = 2

_STATIC, _BATCH, _DIM, _NAMED = "static", "batch", "dim", "named"
_IDENTIFIER_CLEANUP = re.compile(r"\W+")


def _as_tuple(path: Any) -> tuple:
    return path if isinstance(path, tuple) else (path,)


def _identifier(name: str) -> str:
    """torch.export dim names become sympy symbols and must be identifiers."""
    text = _IDENTIFIER_CLEANUP.sub("_", name).strip("_") or "dim"
    return f"d_{text}" if text[0].isdigit() else text


@dataclasses.dataclass
class _Axis:
    kind: str  # static | batch | dim | named
    multiplier: int = 1  # batch axes: size = multiplier * batch
    definition: DynamicDim | None = None  # named axes


class ExportShapePlan:
    """The per-axis decisions for one graph: what each tensor axis is to torch.export, and the
    batch range. Built once; :func:`build_dynamic_shapes` and :func:`prepare_export_sample`
    read it."""

    def __init__(self, graph: GraphSpec) -> None:
        self.graph = graph
        self.params = graph.forward_params
        definitions = {_as_tuple(path): shape for path, shape in (graph.dynamic_shapes or {}).items()}
        self._tensors: dict[tuple, TensorLeaf] = {_as_tuple(t.semantic_path): t for t in graph.input_spec.tensors}
        batched = graph.has_batch_axis()
        self.axes: dict[tuple, list[_Axis]] = {}
        explicit_batch: BatchDim | None = None
        for path, leaf in self._tensors.items():
            definition = definitions.get(path)
            if definition is not None and len(definition) == leaf.spec.rank:
                axes = []
                for axis in definition:
                    if isinstance(axis, DynamicDim):
                        axes.append(_Axis(_NAMED, definition=axis))
                        if isinstance(axis, BatchDim) and explicit_batch is None:
                            explicit_batch = axis
                    else:
                        axes.append(_Axis(_STATIC))
                self.axes[path] = axes
                continue
            multipliers = leaf.spec.batch_multipliers
            axes = []
            for axis, kind in enumerate(leaf.spec.axis_kinds):
                if kind == "batch" and batched:
                    axes.append(_Axis(_BATCH, multiplier=int(round(multipliers[axis]))))
                elif kind in ("batch", "dim"):
                    # a batch axis only counts when every input has one (docs/reference/recording.md#dynamic-axes)
                    axes.append(_Axis(_DIM))
                else:
                    axes.append(_Axis(_STATIC))
            self.axes[path] = axes

        # The batch range: an explicit BatchDim wins (its axes and the inferred ones share one
        # Dim); otherwise the recorded range of the inferred batch axes.
        self.explicit_batch = explicit_batch
        if explicit_batch is not None:
            self.batch_range: tuple[int, int] | None = (explicit_batch.min, explicit_batch.max)
        elif batched and any(a.kind == _BATCH for axes in self.axes.values() for a in axes):
            mins = [t.spec.min_batch_size() for t in self._tensors.values() if t.spec.has_batch_axis()]
            maxs = [t.spec.max_batch_size() for t in self._tensors.values() if t.spec.has_batch_axis()]
            low = min(v for v in mins if v is not None)
            high = max(v for v in maxs if v is not None)
            self.batch_range = (low, high) if high > low else None
        else:
            self.batch_range = None

    # -- queries -----------------------------------------------------------------------------
    def is_dynamic(self) -> bool:
        for axes in self.axes.values():
            for axis in axes:
                if axis.kind in (_DIM, _NAMED) or (axis.kind == _BATCH and self.batch_range is not None):
                    return True
        return False

    def export_batch_size(self) -> int | None:
        """Batch size of the export sample: 2 when the max is at least 2, kept inside the
        range (a graph recorded only at batch 4 and 8 exports at 4)."""
        if self.batch_range is None:
            return None
        low, high = self.batch_range
        return max(low, min(EXPORT_BATCH_SIZE, high))

    def target_shape(self, path: tuple, shape: list[int]) -> list[int]:
        axes = self.axes.get(path)
        if axes is None or len(axes) != len(shape):
            return list(shape)
        batch = self.export_batch_size()
        out = list(shape)
        for i, axis in enumerate(axes):
            if axis.kind == _BATCH and batch is not None:
                out[i] = axis.multiplier * batch
            elif axis.kind == _NAMED:
                d = axis.definition
                if isinstance(d, BatchDim) and d is self.explicit_batch and batch is not None:
                    out[i] = batch
                elif out[i] == 1 and d.max >= 2:
                    out[i] = max(2, d.min)
                out[i] = min(max(out[i], d.min), d.max)
            elif axis.kind == _DIM and out[i] == 1:
                leaf = self._tensors[path]
                if leaf.spec.max_shape[i] >= 2:
                    out[i] = 2
        return out

    # -- torch.export values -----------------------------------------------------------------
    def _dims(self, hint_dynamic_dims: bool = False) -> tuple[Any, dict[str, Any]]:
        """(batch Dim, {declared name: Dim}). With `hint_dynamic_dims`, a declared DynamicDim that
        is not the batch is a range hint, Dim.DYNAMIC(min, max), instead of a named Dim: a named
        Dim must hold for every size in its range, and a model can prove otherwise for its
        sample (ResNet's strided layers guard `((spatial - 1) // 2) % 2 != 0` at 224, which
        torch.export rejects as "Constraints violated (spatial)"), while a hint keeps the range
        and lets export refine it."""
        from torch.export import Dim

        named: dict[str, Any] = {}
        batch_dim = None
        if self.explicit_batch is not None:
            b = self.explicit_batch
            batch_dim = Dim(_identifier(b.name), min=b.min, max=b.max)
            named[b.name] = batch_dim
        elif self.batch_range is not None:
            batch_dim = Dim(BATCH_DIM_NAME, min=self.batch_range[0], max=self.batch_range[1])
        taken = {BATCH_DIM_NAME} if batch_dim is not None and self.explicit_batch is None else set()
        for axes in self.axes.values():
            for axis in axes:
                d = axis.definition
                if axis.kind != _NAMED or d.name in named:
                    continue
                if hint_dynamic_dims and not isinstance(d, BatchDim):
                    named[d.name] = Dim.DYNAMIC(min=d.min, max=d.max)
                    continue
                name = _identifier(d.name)
                while name in taken:
                    name += "_"
                taken.add(name)
                named[d.name] = Dim(name, min=d.min, max=d.max)
        return batch_dim, named

    def tensor_dynamic_shape(self, path: tuple, batch_dim: Any, named: dict[str, Any]) -> dict[int, Any] | None:
        from torch.export import Dim

        spec: dict[int, Any] = {}
        for i, axis in enumerate(self.axes.get(path, ())):
            if axis.kind == _BATCH and batch_dim is not None:
                spec[i] = batch_dim if axis.multiplier == 1 else axis.multiplier * batch_dim
            elif axis.kind == _DIM:
                spec[i] = Dim.AUTO
            elif axis.kind == _NAMED:
                spec[i] = named[axis.definition.name]
        return spec or None


def _holds_tensor(value: Any) -> bool:
    found = False

    def mark(_path: tuple, tensor: torch.Tensor) -> torch.Tensor:
        nonlocal found
        found = True
        return tensor

    map_tensors(value, mark)
    return found


def _check_no_user_types(value: Any) -> None:
    """Raises when a tensor sits under a dataclass, a UserDict-like mapping or a registered
    user type: torch.export's pytree cannot address it, as in AITune."""
    if isinstance(value, (tuple, list)):
        for item in value:
            _check_no_user_types(item)
    elif isinstance(value, dict):
        for item in value.values():
            _check_no_user_types(item)
    elif not isinstance(value, torch.Tensor):
        rule, _ = Locator._classify(type(value))
        if rule in (2, 3, 4) and _holds_tensor(value):
            raise ValueError(USER_TYPE_ERROR)


def _bind(graph: GraphSpec, sample: Sample) -> dict:
    return _C.Signature(graph.forward_params).bind(tuple(sample.args), dict(sample.kwargs))


def _var_keyword_param(graph: GraphSpec) -> str | None:
    return next((name for name, kind, _ in graph.forward_params if kind == 4), None)


def var_keyword_names(graph: GraphSpec, sample: Sample | None = None) -> list[str]:
    """The keys the call passes through the forward's ``**kwargs``. torch.export cannot take
    dynamic shapes under a ``**kwargs`` parameter, so exporters give the forward they trace one
    keyword-only parameter per key instead (see build_dynamic_shapes)."""
    sample = sample if sample is not None else graph.samples[0]
    varkw = _var_keyword_param(graph)
    if varkw is None:
        return []
    return list(_bind(graph, sample).get(varkw, {}))


def build_dynamic_shapes(
    graph: GraphSpec, sample: Sample | None = None, plan: ExportShapePlan | None = None, hint_dynamic_dims: bool = False
) -> dict[str, Any] | None:
    """torch.export ``dynamic_shapes`` for `graph`, keyed by forward parameter name for every
    parameter the call passes (non-tensors -> None; containers mirrored); the entries of a
    ``**kwargs`` parameter are keyed by their own names (see var_keyword_names). None when
    every axis is static. `sample` gives the call structure (default: the graph's first
    sample). `hint_dynamic_dims`: declared non-batch DynamicDims as range hints (see _dims)."""
    sample = sample if sample is not None else graph.samples[0]
    plan = plan or ExportShapePlan(graph)
    bound = _bind(graph, sample)
    for value in bound.values():
        _check_no_user_types(value)
    if not plan.is_dynamic():
        return None
    batch_dim, named = plan._dims(hint_dynamic_dims)

    def mirror(value: Any, path: tuple) -> Any:
        if isinstance(value, torch.Tensor):
            return plan.tensor_dynamic_shape(path, batch_dim, named)
        if isinstance(value, (tuple, list)):
            items = [mirror(v, path + (i,)) for i, v in enumerate(value)]
            if isinstance(value, list):
                return items
            # namedtuples keep their type (torch.export matches containers by type)
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if isinstance(value, dict):
            return {k: mirror(v, path + (k,)) for k, v in value.items()}
        return None

    varkw = _var_keyword_param(graph)
    shapes: dict[str, Any] = {}
    for name, value in bound.items():
        if name == varkw and isinstance(value, dict):
            for key, item in value.items():
                shapes[key] = mirror(item, (name, key))
        else:
            shapes[name] = mirror(value, (name,))
    return shapes


def has_size_one_dynamic_axis(graph: GraphSpec, sample: Sample, plan: ExportShapePlan | None = None) -> bool:
    """True when a batch or dim axis of `sample` has size 0 or 1. Dynamo specialises such sizes
    even in a dynamic=True build (its 0/1 specialisation), so a dynamic build called on this
    sample compiles a graph for this shape alone."""
    plan = plan or ExportShapePlan(graph)
    found = False

    def visit(path: tuple, tensor: torch.Tensor) -> torch.Tensor:
        nonlocal found
        axes = plan.axes.get(path) or ()
        if len(axes) == tensor.dim():
            found = found or any(a.kind in (_BATCH, _DIM, _NAMED) and tensor.shape[i] <= 1 for i, a in enumerate(axes))
        return tensor

    map_tensors(_bind(graph, sample), visit)
    return found


def prepare_export_sample(
    graph: GraphSpec, sample: Sample | None = None, plan: ExportShapePlan | None = None
) -> tuple[tuple, dict]:
    """The canonical (args, kwargs) torch.export traces: `sample` (default: sample 0) with
    every batch axis resized to the export batch size and size-1 dynamic axes widened to 2."""
    sample = sample if sample is not None else graph.samples[0]
    plan = plan or ExportShapePlan(graph)
    bound = _bind(graph, sample)

    def resize(path: tuple, tensor: torch.Tensor) -> torch.Tensor:
        target = plan.target_shape(path, list(tensor.shape))
        return tensor if target == list(tensor.shape) else resize_to(tensor, target)

    resized = map_tensors(bound, resize)
    return canonical_call(graph.forward_params, resized)
