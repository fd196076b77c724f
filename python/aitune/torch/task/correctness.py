"""Structural correctness checks of a built backend (docs/reference/validation.md#structural-checks).
The numeric comparison with eager (#numeric-comparison there) builds on these."""

from __future__ import annotations

import copy
import math

import torch

from aitune._native import _C
from aitune.exceptions import CorrectnessDynamicShapeError, CorrectnessTensorShapeError, CorrectnessValueError
from aitune.torch.backend.backend import Backend
from aitune.torch.graph.graph_spec import GraphSpec, Sample, TensorLeaf, resize_to
from aitune.torch.graph.locator import access_path, semantic_path
from aitune.torch.graph.tree import canonical_call
from aitune.torch.graph.tree import map_tensors


def check_finite(output: object) -> None:
    _, leaves = _C.flatten_value(output)
    for flat in leaves:
        steps, value, is_tensor = flat.path, flat.value, flat.is_tensor
        name = access_path(steps, "output")
        if is_tensor:
            if not (value.is_floating_point() or value.is_complex()):
                continue
            if torch.isnan(value).any():
                raise CorrectnessValueError(f"Output tensor {name} contains NaN values")
            if torch.isinf(value).any():
                raise CorrectnessValueError(f"Output tensor {name} contains infinity values")
        elif isinstance(value, float) and not math.isfinite(value):
            raise CorrectnessValueError(f"Output {name} is not finite: {value!r}")


def check_output_structure(graph: GraphSpec, output: object) -> None:
    _, leaves = _C.flatten_value(output)
    actual = {semantic_path(leaf.path) if leaf.path else (): leaf.value for leaf in leaves if leaf.is_tensor}
    expected: list[TensorLeaf] = graph.output_spec.tensors
    errors = []
    if len(actual) != len(expected):
        errors.append(f"Expected {len(expected)} output tensor(s) but got {len(actual)}")
    for leaf in expected:
        value = actual.get(leaf.semantic_path)
        if value is None:
            errors.append(f"Expected tensor {leaf.access_path} is missing from the output")
        elif not leaf.spec.matches(list(value.shape)):
            errors.append(
                f"Expected tensor {leaf.access_path} to have shape {leaf.spec.shape} but got {list(value.shape)}"
            )
    if errors:
        raise CorrectnessTensorShapeError(
            f"{len(errors)} error(s) related to output tensor shapes:\n" + "\n".join(f"- {e}" for e in errors)
        )


def resized_sample(graph: GraphSpec, sample: Sample, which: str) -> tuple[tuple, dict]:
    """Sample with every tensor input resized to the graph's recorded min or max shape."""
    targets = {
        (leaf.semantic_path if isinstance(leaf.semantic_path, tuple) else (leaf.semantic_path,)): (
            leaf.spec.min_shape if which == "min" else leaf.spec.max_shape
        )
        for leaf in graph.input_spec.tensors
    }
    sig = _C.Signature(graph.forward_params)
    bound = sig.bind(sample.args, sample.kwargs)
    resized = map_tensors(bound, lambda path, t: resize_to(t, targets[path]) if path in targets else t)

    return canonical_call(graph.forward_params, resized)


def check_correctness(backend: Backend, graph: GraphSpec, data: list[Sample], description: str) -> None:
    """Runs every stored sample (finite outputs, output structure), then sample 0 at the
    recorded min and max shapes when the graph has a dynamic axis."""
    if not data:
        raise ValueError(f"Correctness check requires at least one sample for graph spec {graph.name}.")
    with torch.no_grad():
        for sample in data:
            args, kwargs = copy.deepcopy((sample.args, sample.kwargs))
            output = backend.infer(*args, **kwargs)
            check_finite(output)
            check_output_structure(graph, output)
        if graph.input_spec.has_dynamic_axis():
            for which in ("min", "max"):
                args, kwargs = resized_sample(graph, data[0], which)
                try:
                    output = backend.infer(*args, **kwargs)
                    _, leaves = _C.flatten_value(output)
                    if sum(1 for leaf in leaves if leaf.is_tensor) != len(graph.output_spec.tensors):
                        raise ValueError("the number of output tensors differs from the recorded output spec")
                except Exception as e:  # noqa: BLE001 - any failure at the boundary shapes is the finding
                    raise CorrectnessDynamicShapeError(
                        f"Dynamic shape correctness check failed with {which} input shapes for {description}: {e}"
                    ) from e
