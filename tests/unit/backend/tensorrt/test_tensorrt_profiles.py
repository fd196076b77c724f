"""TensorRT optimization profiles from recorded graphs (docs/reference/tensorrt.md#optimization-profiles): derivation
for every mode, custom-profile validation with the exact messages, key resolution, per-call selection errors."""

from __future__ import annotations

import pytest
import torch

import aitune.torch as ait
from aitune._native import _C
from aitune.exceptions import AITuneUserInputError, ProfileShapeError
from aitune.torch import BatchDim, DynamicDim
from aitune.torch.backend.tensorrt import ProfileMode, TensorRTProfile
from aitune.torch.backend.tensorrt.profiles import (
    DYNAMIC_SHAPES_CONFLICT,
    build_profiles,
    read_profiles,
    write_profiles,
)
from aitune.torch.config import config
from aitune.torch.global_context import published_batch_size


class Image(torch.nn.Module):
    def forward(self, input):  # noqa: A002 - the seed guide's parameter name
        return input.mean(dim=(2, 3))


class Tokens(torch.nn.Module):
    def forward(self, inputs):
        return inputs["tokens"].float() * inputs["mask"]


def _record(model, inputs, **kwargs):
    m = ait.Module(model, "m", **kwargs)
    with torch.no_grad():
        for x in inputs:
            with published_batch_size(x.shape[0] if isinstance(x, torch.Tensor) else x["tokens"].shape[0]):
                m(x)
    return m.graph_specs[0]


def _images(shapes):
    return [torch.randn(*s) for s in shapes]


def _tokens(batch, length):
    return {"tokens": torch.ones(batch, length, dtype=torch.long), "mask": torch.ones(batch, length)}


def test_single_is_recorded_min_then_recorded_max():
    graph = _record(Image(), _images([(2, 3, 224, 224), (8, 3, 448, 448)]))
    assert build_profiles(graph, ProfileMode.SINGLE) == [[([2, 3, 224, 224], [8, 3, 448, 448], [8, 3, 448, 448])]]


def test_samples_used_is_one_static_profile_per_distinct_stored_shape():
    config.max_num_samples_stored = 10
    graph = _record(Image(), _images([(2, 3, 32, 32), (4, 3, 64, 64), (2, 3, 32, 32)]))
    assert build_profiles(graph, ProfileMode.SAMPLES_USED) == [
        [([2, 3, 32, 32], [2, 3, 32, 32], [2, 3, 32, 32])],
        [([4, 3, 64, 64], [4, 3, 64, 64], [4, 3, 64, 64])],
    ]


def test_module_dynamic_shapes_give_one_profile_and_reject_user_profiles():
    shapes = {"input": (BatchDim("batch", 1, 16, opt=4), 3, DynamicDim("s", 16, 64), DynamicDim("s", 16, 64))}
    graph = _record(Image(), _images([(2, 3, 32, 32)]), dynamic_shapes=shapes)
    assert build_profiles(graph, ProfileMode.SINGLE) == [[([1, 3, 16, 16], [4, 3, 64, 64], [16, 3, 64, 64])]]
    user = [TensorRTProfile().add_input_shape("input", (1, 3, 32, 32), (2, 3, 32, 32), (4, 3, 32, 32))]
    with pytest.raises(AITuneUserInputError) as info:
        build_profiles(graph, user)
    assert str(info.value) == DYNAMIC_SHAPES_CONFLICT
    assert DYNAMIC_SHAPES_CONFLICT == (
        "TensorRT profiles cannot be provided together with module dynamic shape definitions."
    )


def test_user_profile_keys_resolve_by_semantic_or_access_path():
    graph = _record(Tokens(), [_tokens(2, 8), _tokens(4, 16)])
    by_access = [
        TensorRTProfile()
        .add_input_shape('inputs["mask"]', (1, 8), (2, 8), (4, 16))
        .add_input_shape('inputs["tokens"]', (1, 8), (2, 8), (4, 16))
    ]
    by_semantic = [
        TensorRTProfile()
        .add_input_shape(("inputs", "tokens"), (1, 8), (2, 8), (4, 16))
        .add_input_shape(["inputs", "mask"], (1, 8), (2, 8), (4, 16))
    ]
    expected = [[([1, 8], [2, 8], [4, 16]), ([1, 8], [2, 8], [4, 16])]]
    assert build_profiles(graph, by_access) == expected
    assert build_profiles(graph, by_semantic) == expected


def _error(graph, profile) -> str:
    with pytest.raises(AITuneUserInputError) as info:
        build_profiles(graph, [profile])
    return str(info.value)


def test_user_profile_errors_have_the_spec_messages():
    graph = _record(Image(), _images([(2, 3, 224, 224), (8, 3, 448, 448)]))
    unknown = TensorRTProfile().add_input_shape("image", (1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))
    assert _error(graph, unknown) == (
        "TensorRT profile inputs ['image'] do not match recorded tensor inputs ['input'] (missing: ['input'], "
        "unknown: ['image'])."
    )
    assert _error(graph, TensorRTProfile().add_input_shape("input", (1, 3, 224), (4, 3, 224), (8, 3, 224))) == (
        "TensorRT profile for input 'input' has rank 3, recorded rank is 4."
    )
    assert _error(
        graph, TensorRTProfile().add_input_shape("input", (4, 3, 224, 224), (1, 3, 224, 224), (8, 3, 224, 224))
    ) == (
        "TensorRT profile for input 'input' must satisfy min <= opt <= max on every axis, got min=[4, 3, 224, 224], "
        "opt=[1, 3, 224, 224], max=[8, 3, 224, 224]"
    )
    assert _error(
        graph, TensorRTProfile().add_input_shape("input", (1, 1, 224, 224), (4, 3, 224, 224), (8, 4, 224, 224))
    ) == ("TensorRT profile for input 'input' axis 1 is static (3) in the recorded graph, got min=1, max=4")
    with pytest.raises(ValueError, match="must hold non-negative integers"):
        TensorRTProfile().add_input_shape("input", (-1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))


def test_selection_errors_name_the_shapes():
    names = ["input"]
    profiles = [
        [([1, 3, 224, 224], [4, 3, 224, 224], [8, 3, 224, 224])],
        [([1, 3, 512, 512], [4, 3, 512, 512], [8, 3, 512, 512])],
    ]
    selector = _C.TrtProfileSelector(names, profiles)
    assert selector.select([[4, 3, 224, 224]]) == 0 and selector.select([[2, 3, 512, 512]]) == 1
    with pytest.raises(
        ProfileShapeError,
        match=r"^Input shape \[16, 3, 224, 224\] exceeds max profile shape "
        r"\[8, 3, 512, 512\] for input 'input'$",
    ):
        selector.select([[16, 3, 224, 224]])
    with pytest.raises(
        ProfileShapeError,
        match=r"^Input shape \[1, 3, 100, 100\] is below min profile shape "
        r"\[1, 3, 224, 224\]",
    ):
        selector.select([[1, 3, 100, 100]])
    with pytest.raises(ProfileShapeError) as info:
        selector.select([[2, 3, 300, 300]])
    assert str(info.value) == (
        "No TensorRT optimization profile matches the input shapes: {'input': [2, 3, 300, 300]}; profiles: "
        "[{'input': [[1, 3, 224, 224], [4, 3, 224, 224], [8, 3, 224, 224]]}, {'input': [[1, 3, 512, 512], "
        "[4, 3, 512, 512], [8, 3, 512, 512]]}]"
    )
    assert selector.envelope() == [([1, 3, 224, 224], [8, 3, 512, 512])]


def test_profiles_json_is_tensor_name_to_min_opt_max(tmp_path):
    profiles = [
        [([1, 8], [2, 8], [4, 8]), ([1, 8], [2, 8], [4, 8])],
        [([8, 8], [8, 8], [8, 8]), ([8, 8], [8, 8], [8, 8])],
    ]
    path = tmp_path / "tensorrt" / "model_optimization_profiles.json"
    write_profiles(path, profiles, ["input_inputs_mask", None])
    import json

    assert json.loads(path.read_text()) == {"input_inputs_mask": [[[1, 8], [2, 8], [4, 8]], [[8, 8], [8, 8], [8, 8]]]}
    assert read_profiles(path, ["input_inputs_mask"]) == [[([1, 8], [2, 8], [4, 8])], [([8, 8], [8, 8], [8, 8])]]
