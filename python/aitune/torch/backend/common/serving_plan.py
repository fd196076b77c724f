"""How a built backend serves its graph (docs/reference/dispatch.md#serving-plan): one `ServingPlan` per graph,
the same kind of object from every backend, and `OutputStructure`, the one rebuild of a runner's flat
output tensors into the forward's output object.

The plan is what the dispatcher serves (module/tuned.py), what the strategies time and what a
checkpoint records for the C++ runtime (checkpoint/format.py): one object, so tuning measures the
path that serves."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable

import torch

from aitune._native import _C
from aitune.torch.checkpoint import structure
from aitune.torch.graph.locator import access_path, semantic_path
from aitune.torch.graph.tree import map_tensors

SINGLE = ()  # the key path of an output that is one tensor


def _key(path: Any) -> tuple:
    return path if isinstance(path, tuple) else (path,)


def _placeholder() -> torch.Tensor:
    return torch.empty(0)


class OutputStructure:
    """The forward's output object with its tensors taken out: `paths[k]` is the key path (a tuple
    of keys and indices, `()` for a bare tensor) where the runner's output k goes, `access[k]` the
    same as Python spells it (`output[1]["logits"]`). Other values of the template (None, ints,
    strings) are returned as recorded.

    Learned from the first output when not known at build time (a Python backend behind the
    CUDA-graph runner), else fixed at construction. Immutable once known."""

    __slots__ = ("template", "paths", "access")

    def __init__(self, template: Any = None, paths: list[tuple] | None = None, access: list[str] | None = None) -> None:
        self.template = template
        self.paths = paths
        self.access = access

    @classmethod
    def of(cls, output: Any) -> OutputStructure:
        """The structure of `output`, its tensors in aitune's flattening order (`_C.flatten_value`)."""
        structure = cls()
        structure.learn(output)
        return structure

    @classmethod
    def of_treespec(cls, spec: Any) -> OutputStructure:
        """The structure of outputs that come flat in pytree order of `spec` (an AOTInductor package's
        out_spec). Every leaf must land where aitune's flattener finds a tensor: the C++ runtime
        names outputs by the same walk."""
        import torch.utils._pytree as pytree

        leaves = [_placeholder() for _ in range(spec.num_leaves)]
        template = pytree.tree_unflatten(leaves, spec)
        position = {id(t): k for k, t in enumerate(leaves)}
        paths: list[tuple | None] = [None] * len(leaves)
        access: list[str | None] = [None] * len(leaves)
        _, template_leaves = _C.flatten_value(template)
        for flat in template_leaves:
            steps, value, is_tensor = flat.path, flat.value, flat.is_tensor
            k = position.get(id(value)) if is_tensor else None
            if k is not None:
                paths[k] = _key(semantic_path(steps)) if steps else SINGLE
                access[k] = access_path(steps, "output")
        missing = [k for k, p in enumerate(paths) if p is None]
        if missing:
            raise ValueError(
                f"the output structure {spec} has {len(missing)} leaf/leaves (positions {missing}) inside a container "
                "aitune's flattener does not walk; expected tuples, lists, dicts, dataclasses or named tuples"
            )
        return cls(template, paths, access)  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, node: Any) -> OutputStructure:
        """The structure stored by to_json() (checkpoint/structure.py's codec; tensors were placeholders)."""
        template = structure.decode(node, collections.defaultdict(_placeholder))
        return cls.of(template)

    def to_json(self) -> Any:
        """The template as checkpoint/structure.py's JSON skeleton; raises structure.NotRepresentable."""
        return structure.encode(map_tensors(self.template, lambda _p, _t: _placeholder()), {})

    @property
    def known(self) -> bool:
        return self.paths is not None

    @property
    def single(self) -> bool:
        """The output is one bare tensor: the dispatcher returns it without a rebuild."""
        return self.paths == [SINGLE]

    @property
    def num_outputs(self) -> int:
        if self.paths is None:
            raise RuntimeError("the output structure is not known: the graph has not run yet")
        return len(self.paths)

    def learn(self, output: Any) -> list[torch.Tensor]:
        """The tensors of `output` in flattening order; the first call fixes the structure."""
        _, leaves = _C.flatten_value(output)
        if self.paths is None:
            self.template = map_tensors(output, lambda _p, _t: _placeholder())
            self.access = [access_path(leaf.path, "output") for leaf in leaves if leaf.is_tensor]
            self.paths = [_key(semantic_path(leaf.path)) if leaf.path else SINGLE for leaf in leaves if leaf.is_tensor]
        return [leaf.value for leaf in leaves if leaf.is_tensor]

    def rebuild(self, outputs: list[torch.Tensor]) -> Any:
        """The output object with `outputs` (runner order) in place of the template's tensors."""
        if self.paths is None:
            raise RuntimeError("the output structure is not known: the graph has not run yet")
        if self.paths == [SINGLE]:
            return outputs[0]
        if len(outputs) != len(self.paths):
            raise RuntimeError(f"the runner returned {len(outputs)} output tensor(s); expected {len(self.paths)}")
        by_path = dict(zip(self.paths, outputs))
        return map_tensors(self.template, lambda path, t: by_path.get(path, t))


@dataclasses.dataclass(frozen=True)
class ServingPlan:
    """How one graph is served. `call(*args, **kwargs)` serves a call from Python (Backend.infer,
    the dispatcher without a native runner). With `native` (a `_C.Runner`: AOTInductor's runner, the
    CUDA-graph runner), the dispatcher instead hands the runner the graph's tensor inputs
    `input_order` picks (native input k is tensor leaf input_order[k]) without Python, and rebuilds
    its flat outputs with `outputs`."""

    call: Callable[..., Any]
    native: Any = None
    input_order: tuple[int, ...] = ()
    outputs: OutputStructure | None = None

    def __post_init__(self) -> None:
        if self.native is not None and self.outputs is None:
            raise ValueError("a native serving plan needs the output structure its runner's outputs go into")

    @property
    def rebuild(self) -> Callable[[list[torch.Tensor]], Any] | None:
        """What the dispatcher calls on a native runner's outputs; None when the output is one tensor."""
        if self.outputs is None or self.outputs.single:
            return None
        return self.outputs.rebuild
