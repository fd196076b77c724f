"""Optimization profiles for a graph (docs/reference/tensorrt.md#optimization-profiles). The rules live in C++
(cpp/core/spec/trt_profiles.h); this module turns a GraphSpec and the config into their inputs
and resolves profile keys to recorded inputs.

A profile is a list with one (min, opt, max) per tensor input of the graph, in
graph.input_spec.tensors order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aitune._native import _C
from aitune.exceptions import AITuneUserInputError
from aitune.torch.backend.tensorrt.tensorrt_config import ProfileMode, TensorRTProfile
from aitune.torch.graph.dynamic_shapes import to_native
from aitune.torch.graph.graph_spec import GraphSpec, TensorLeaf

Profile = list[tuple[list[int], list[int], list[int]]]

DYNAMIC_SHAPES_CONFLICT = "TensorRT profiles cannot be provided together with module dynamic shape definitions."
SAMPLES_USED_NEEDS_SAMPLES = (
    "aitune.torch.config.max_num_samples_stored is set to 1, change it to number of samples to use for profile "
    "generation. For example: `aitune.torch.config.max_num_samples_stored = 100` (or float('inf')) before recording, "
    "or use ProfileMode.SINGLE."
)


def _as_tuple(path: Any) -> tuple:
    return path if isinstance(path, tuple) else (path,)


def recorded_inputs(graph: GraphSpec) -> list[tuple]:
    """(name, semantic repr, min, max, static flags) per tensor input, as the C++ rules take them."""
    out = []
    for leaf in graph.input_spec.tensors:
        spec = leaf.spec
        out.append(
            (
                leaf.access_path,
                repr(leaf.semantic_path),
                list(spec.min_shape),
                list(spec.max_shape),
                [kind == "static" for kind in spec.axis_kinds],
            )
        )
    return out


def resolve_key(graph: GraphSpec, key: Any) -> TensorLeaf | None:
    """The recorded tensor input a profile key names: a semantic path (string or tuple) or the
    access-path string of the log table. Both forms resolve structurally to the same leaf."""
    for leaf in graph.input_spec.tensors:
        if isinstance(key, str) and key == leaf.access_path:
            return leaf
        if _as_tuple(key) == _as_tuple(leaf.semantic_path):
            return leaf
    return None


def _key_display(key: Any) -> str:
    return key if isinstance(key, str) else repr(key)


def _as_profile(raw: list) -> Profile:
    return [(list(low), list(opt), list(high)) for low, opt, high in raw]


def build_profiles(graph: GraphSpec, mode: ProfileMode | list[TensorRTProfile]) -> list[Profile]:
    """The profiles the engine is built with; user profiles are validated here (build time)."""
    recorded = recorded_inputs(graph)
    if isinstance(mode, list):
        if graph.dynamic_shapes:
            raise AITuneUserInputError(DYNAMIC_SHAPES_CONFLICT)
        user = []
        for profile in mode:
            entries = []
            for key, (low, opt, high) in profile.inputs.items():
                leaf = resolve_key(graph, key)
                entries.append(
                    (leaf.access_path if leaf is not None else _key_display(key), list(low), list(opt), list(high))
                )
            user.append(entries)
        return [_as_profile(p) for p in _C.trt_validate_profiles(recorded, user)]
    if graph.dynamic_shapes:
        return [_as_profile(p) for p in _C.trt_dynamic_shapes_profile(recorded, to_native(graph.dynamic_shapes))]
    if mode is ProfileMode.SAMPLES_USED:
        shapes = [[list(t.shape) for t in _sample_tensors(graph, s)] for s in graph.samples]
        return [_as_profile(p) for p in _C.trt_samples_used_profiles(recorded, shapes)]
    return [_as_profile(p) for p in _C.trt_single_profile(recorded)]


def _sample_tensors(graph: GraphSpec, sample: Any) -> list:
    """The tensor leaves of a stored sample, in graph.input_spec.tensors order."""
    signature = _C.Signature(graph.forward_params)
    _, leaves = _C.flatten_call(signature, tuple(sample.args), dict(sample.kwargs), False, -1)
    return [leaf.value for leaf in leaves if leaf.is_tensor]


def profiles_to_json(profiles: list[Profile], names: list[str | None]) -> dict[str, list]:
    """{tensor name: [[min, opt, max] per profile]} for model_optimization_profiles.json; inputs
    the engine does not take (name None) are left out."""
    out: dict[str, list] = {}
    for i, name in enumerate(names):
        if name is not None:
            out[name] = [[list(p[i][0]), list(p[i][1]), list(p[i][2])] for p in profiles]
    return out


def write_profiles(path: Path, profiles: list[Profile], names: list[str | None]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(profiles_to_json(profiles, names), indent=2))


def read_profiles(path: Path, names: list[str]) -> list[Profile]:
    """Inverse of write_profiles for the engine's input `names` (in the order given)."""
    data = json.loads(Path(path).read_text())
    count = len(next(iter(data.values()))) if data else 0
    return [[tuple(data[name][p]) for name in names] for p in range(count)]
