"""Which graph tensor feeds which input of an AOTInductor package (torch_inductor_aot_backend.py,
"Input order"): the package takes its tensors in pytree order of the canonical (args, kwargs),
its in_spec; aitune flattens calls its own way (docs/reference/recording.md#binding-flattening-and-names).
Shared by the backend and its load check's child process (load_check.py)."""

from __future__ import annotations

import dataclasses
from typing import Iterator

import torch.utils._pytree as pytree

from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.graph.locator import SemanticPath


@dataclasses.dataclass(frozen=True)
class _Slot:
    index: int


def leaf_paths(obj: object, path: tuple = ()) -> Iterator[tuple[tuple, object]]:
    """(path, leaf) pairs: tuples and lists (namedtuples included) by index and dicts by key,
    like aitune's flattener; other pytree nodes by leaf index."""
    if isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj):
            yield from leaf_paths(item, path + (i,))
    elif isinstance(obj, dict):
        for key, item in obj.items():
            yield from leaf_paths(item, path + (key,))
    elif type(obj) in pytree.SUPPORTED_NODES:
        for i, item in enumerate(pytree.tree_leaves(obj)):
            yield path + (i,), item
    else:
        yield path, obj


def spec_paths(in_spec: pytree.TreeSpec) -> list[tuple]:
    """For each leaf of `in_spec` (over (args, kwargs)), in order, its path as raw keys:
    (0, i, ...) for positional args, (1, name, ...) for kwargs (see leaf_paths)."""
    tree = pytree.tree_unflatten([_Slot(i) for i in range(in_spec.num_leaves)], in_spec)
    paths: list[tuple] = [()] * in_spec.num_leaves
    for path, slot in leaf_paths(tree):
        if isinstance(slot, _Slot):
            paths[slot.index] = path
    return paths


def _semantic_path(call_path: tuple, params: list) -> tuple:
    """(0, i, ...) / (1, name, ...) of the canonical call -> the semantic path as a tuple
    (docs/reference/recording.md#binding-flattening-and-names: parameter name first; *args and
    **kwargs contents under their own name)."""
    if len(call_path) < 2:
        return call_path
    top, key, rest = call_path[0], call_path[1], call_path[2:]
    if top == 0:
        positional = [name for name, kind, _ in params if kind in (0, 1)]
        if key < len(positional):
            return (positional[key], *rest)
        varargs = next((name for name, kind, _ in params if kind == 2), "args")
        return (varargs, key - len(positional), *rest)
    named = {name for name, kind, _ in params if kind in (1, 3)}
    if key in named:
        return (key, *rest)
    varkw = next((name for name, kind, _ in params if kind == 4), "kwargs")
    return (varkw, key, *rest)


def _semantic_tuple(path: SemanticPath) -> tuple:
    return path if isinstance(path, tuple) else (path,)


def input_order(in_paths: list[tuple], graph: GraphSpec) -> list[int]:
    """For each package input position (its in_spec leaves' `in_paths`), the index of the graph
    tensor leaf (graph.input_spec.tensors order) that feeds it; constants are baked in."""
    tensors = {_semantic_tuple(t.semantic_path): i for i, t in enumerate(graph.input_spec.tensors)}
    constants = {_semantic_tuple(c.semantic_path) for c in graph.input_spec.constants}
    order = []
    for call_path in in_paths:
        semantic = _semantic_path(call_path, graph.forward_params)
        if semantic in tensors:
            order.append(tensors[semantic])
        elif semantic not in constants:
            raise RuntimeError(
                f"AOTInductor package input {semantic!r} does not match any input of graph {graph.name} "
                f"({graph.input_spec.describe_structure()})"
            )
    return order
