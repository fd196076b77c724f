"""Graph specs and samples <-> manifest JSON + safetensors (docs/reference/checkpoint.md#layout-and-manifest).

Writing makes the JSON here; reading takes the native reader's typed graph (`_C.ManifestGraph`), never
the JSON: manifest.json has one parser, the C++ core's (docs/design.md#the-checkpoint)."""

from __future__ import annotations

import logging
import math
from typing import Any

import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from aitune._native import _C
from aitune.torch.checkpoint.structure import NotRepresentable, decode, encode
from aitune.torch.graph.dynamic_shapes import ShapeDefinition
from aitune.torch.graph.graph_spec import ConstantLeaf, GraphSpec, Sample, TensorLeaf, TensorsSpec

logger = logging.getLogger("aitune")


def path_to_json(path: str | int | tuple) -> str | int | dict[str, list]:
    return {"tuple": list(path)} if isinstance(path, tuple) else path


def _leaf_to_json(leaf: TensorLeaf | ConstantLeaf) -> dict[str, Any]:
    if isinstance(leaf, TensorLeaf):
        spec = leaf.spec
        return {
            "semantic_path": path_to_json(leaf.semantic_path),
            "access_path": leaf.access_path,
            "name": leaf.name,
            "shape": spec.shape,
            "axis_kinds": spec.axis_kinds,
            "min_shape": spec.min_shape,
            "max_shape": spec.max_shape,
            "multipliers": [None if math.isnan(m) else m for m in spec.multipliers],
            "dtype": spec.dtype,
            "dtypes": [str(d).removeprefix("torch.") for d in leaf.dtypes],
        }
    return {
        "semantic_path": path_to_json(leaf.semantic_path),
        "access_path": leaf.access_path,
        "value": encode(leaf.value, {}),
        "needs_eq": leaf.needs_eq,
    }


def _leaf_from_native(leaf: _C.ManifestLeaf) -> TensorLeaf | ConstantLeaf:
    """From the native reader's `_C.ManifestLeaf`."""
    if not leaf.is_tensor:
        return ConstantLeaf(leaf.semantic_path, leaf.access_path, decode(leaf.value, {}), leaf.needs_eq)
    spec = _C.TensorSpec.from_parts(
        leaf.axis_kinds,
        leaf.min_shape,
        leaf.max_shape,
        [math.nan if m is None else m for m in leaf.multipliers],
        leaf.dtype,
    )
    return TensorLeaf(leaf.semantic_path, leaf.access_path, spec, [getattr(torch, d) for d in leaf.dtypes])


def spec_to_json(spec: TensorsSpec) -> dict[str, Any]:
    return {"leaves": [_leaf_to_json(leaf) for leaf in spec.leaves]}


def _spec_from_native(leaves: list, is_output: bool) -> TensorsSpec:
    spec = TensorsSpec(is_output)
    spec.leaves = [_leaf_from_native(leaf) for leaf in leaves]
    return spec


def graph_to_json(graph: GraphSpec) -> dict[str, Any]:
    return {
        "name": graph.name,
        "llm_phase": graph.llm_phase,
        "key_tokens": list(graph.key.tokens),
        "input_spec": spec_to_json(graph.input_spec),
        "output_spec": spec_to_json(graph.output_spec),
    }


def graph_from_native(
    graph: _C.ManifestGraph, forward_params: list, dynamic_shapes: dict[Any, ShapeDefinition] | None
) -> GraphSpec:
    """A GraphSpec from the native reader's `_C.ManifestGraph`: a checkpoint's graph
    (`ArchiveReader.read_manifest`) or one sent as graph_to_json's text (`_C.read_graph_spec`)."""
    return GraphSpec(
        name=graph.name,
        key=_C.GraphKey.from_tokens(graph.key_tokens),
        inputs=_spec_from_native(graph.inputs, is_output=False),
        outputs=_spec_from_native(graph.outputs, is_output=True),
        forward_params=forward_params,
        dynamic_shapes=dynamic_shapes,
        llm_phase=graph.llm_phase,
    )


def sample_to_entries(sample: Sample, reference_output: Any = None) -> tuple[bytes, dict[str, Any]] | None:
    """(safetensors bytes, JSON skeleton) of one sample and, when given, its eager output;
    None when a non-tensor leaf cannot be represented (the sample stays out of the checkpoint)."""
    tensors: dict[str, torch.Tensor] = {}
    try:
        skeleton = {
            "args": encode(sample.args, tensors),
            "kwargs": encode(sample.kwargs, tensors),
            "batch_size": sample.batch_size,
        }
        if reference_output is not None:
            skeleton["reference_output"] = encode(reference_output, tensors)
    except NotRepresentable as e:
        logger.warning("A recorded sample is kept out of the checkpoint: %s", e)
        return None
    return save_safetensors(tensors), skeleton


def sample_from_entries(data: bytes, skeleton: dict[str, Any]) -> tuple[Sample, Any]:
    tensors = load_safetensors(data)
    sample = Sample(decode(skeleton["args"], tensors), decode(skeleton["kwargs"], tensors), skeleton["batch_size"])
    reference = decode(skeleton["reference_output"], tensors) if "reference_output" in skeleton else None
    return sample, reference
