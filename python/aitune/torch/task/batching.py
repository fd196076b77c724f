"""make_batch (docs/reference/recording.md#dynamic-axes): a stored sample resized to another batch size along its batch
axes, by slicing when longer and repeating row 0 otherwise."""

from __future__ import annotations

from aitune._native import _C
from aitune.torch.graph.graph_spec import GraphSpec, Sample, resize_to
from aitune.torch.graph.locator import semantic_path
from aitune.torch.graph.tree import canonical_call, map_tensors


def _key_path(path) -> tuple:
    return path if isinstance(path, tuple) else (path,)


def make_batch(graph: GraphSpec, sample: Sample, batch_size: int) -> tuple[tuple, dict]:
    specs = {_key_path(leaf.semantic_path): leaf.spec for leaf in graph.input_spec.tensors}
    bound = _C.Signature(graph.forward_params).bind(sample.args, sample.kwargs)

    def resize(path, tensor):
        spec = specs.get(path)
        if spec is None or not spec.has_batch_axis():
            return tensor
        return resize_to(tensor, spec.batched_shape(list(tensor.shape), batch_size))

    return canonical_call(graph.forward_params, map_tensors(bound, resize))


def extend_max_batch(graph: GraphSpec, sample: Sample, batch_size: int) -> None:
    """Widens the graph's max shapes to `batch_size` (the max-batch search result)."""
    for leaf in graph.input_spec.tensors:
        if leaf.spec.has_batch_axis():
            shape = _sample_shape(graph, sample, leaf)
            if shape is not None:
                leaf.spec.extend_max(leaf.spec.batched_shape(shape, batch_size))


def _sample_shape(graph: GraphSpec, sample: Sample, leaf) -> list[int] | None:
    _, leaves = _C.flatten_call(_C.Signature(graph.forward_params), sample.args, sample.kwargs, False, -1)

    for flat in leaves:
        steps, value, is_tensor = flat.path, flat.value, flat.is_tensor
        if is_tensor and semantic_path(steps) == leaf.semantic_path:
            return list(value.shape)
    return None
