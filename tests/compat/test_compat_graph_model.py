"""AITune's graph-model types at AITune's paths (`aitune.torch.module.sample_metadata`,
`.tensor_spec`, `.forward_signature`, `.locator`), driven the way AITune's execution-graphs guide
walks through them (docs/guide.md, "Coming from AITune")."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from aitune.torch.module.forward_signature import ForwardSignature
from aitune.torch.module.locator import Locator
from aitune.torch.module.sample_metadata import InfoLevel, SampleMetadata
from aitune.torch.module.tensor_spec import TensorSpec


@dataclasses.dataclass
class ModelInput:
    data: torch.Tensor
    metadata: str


def _rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("│").split("│")] for line in table.splitlines() if line.startswith("│")]


def test_nested_inputs_give_aitunes_paths_and_the_other_table_when_strict():
    inputs = {
        "values": ["first_arg", torch.randn(1), (torch.randn(2), torch.randn(3)), {"t": torch.randn(4)}],
        "t3": ModelInput(data=torch.randn(4, 4), metadata="xyz"),
        "last": "other",
    }
    strict = SampleMetadata.from_inputs(inputs, strict=True)
    text = repr(strict)
    tensors, other = text.split("Other:")
    assert [r[:3] for r in _rows(tensors)[1:]] == [
        ["values[1]", "('values', 1)", "[1]"],
        ["values[2][0]", "('values', 2, 0)", "[2]"],
        ["values[2][1]", "('values', 2, 1)", "[3]"],
        ['values[3]["t"]', "('values', 3, 't')", "[4]"],
        ["t3.data", "('t3', 'data')", "[4, 4]"],
    ]
    assert [r[0] for r in _rows(other)[1:]] == ["values[0]", "t3.metadata", "last"]
    loose = SampleMetadata.from_inputs(inputs)
    assert "Other:" not in repr(loose) and not loose.other_data and len(loose.tensor_data) == 5


def test_info_levels():
    meta = SampleMetadata.from_inputs({"first": torch.randn(2, 3), "mask": torch.randn(2, 1)})
    assert meta.describe(InfoLevel.SHORT) == "Tensors: first, mask"
    medium = meta.describe(InfoLevel.MEDIUM).splitlines()
    assert medium[1].split() == ["Access", "Path", "Semantic", "Path", "Shape"]
    assert "Min Shape" in meta.describe(InfoLevel.FULL) and "torch.float32" in meta.describe()


def test_update_shapes_seen_learns_batch_and_dynamic_axes_and_make_batch_scales():
    first = SampleMetadata.from_inputs(
        {"features": torch.randn(1, 5), "stacked": torch.randn(2, 3), "data": torch.randn(1, 10)}, batch_size=1
    )
    second = SampleMetadata.from_inputs(
        {"features": torch.randn(2, 5), "stacked": torch.randn(4, 3), "data": torch.randn(2, 25)}, batch_size=2
    )
    first.update_shapes_seen(second)
    specs = {loc.display_path: spec for loc, spec in first.tensor_data}
    assert specs["features"].shape == ["batch0", 5] and specs["features"].get_batch_axis_multipliers() == {0: 1}
    assert specs["stacked"].get_batch_axis_multipliers() == {0: 2}
    assert specs["data"].shape[1] == "dim1" and specs["data"].has_dynamic_axis()
    assert not specs["features"].has_dynamic_axis() and first.has_batch_axis() and first.detected_dynamic_axis
    assert specs["data"].min_shape == [1, 10] and specs["data"].max_shape == [2, 25]
    batched = first.make_batch({"features": torch.randn(1, 5), "stacked": torch.randn(2, 3)}, batch_size=10)
    assert batched["features"].shape == (10, 5) and batched["stacked"].shape == (20, 3)
    with pytest.raises(ValueError, match="expected"):
        first.update_shapes_seen(SampleMetadata.from_inputs({"other": torch.randn(1)}))


def test_tensor_spec_matches_and_dtype():
    a = TensorSpec.from_tensor(torch.zeros(1, 2, dtype=torch.float16), batch_size=1)
    assert a.dtype is torch.float16 and a.shape == [1, 2]
    assert a.matches(TensorSpec.from_tensor(torch.zeros(1, 2)))
    assert not a.matches(TensorSpec.from_tensor(torch.zeros(1, 3)))
    assert not a.matches(TensorSpec.from_tensor(torch.zeros(1, 2, 3)))


def test_outputs_are_rooted_at_output():
    meta = SampleMetadata.from_outputs((torch.ones(2), {"a": torch.ones(3)}))
    assert [loc.display_path for loc, _ in meta.tensor_data] == ["output[0]", 'output[1]["a"]']


def test_forward_signature_normalizes_positional_and_keyword_calls_alike():
    class Net(torch.nn.Module):
        def forward(self, x, scale=1.0, *, bias=None):
            return x

    signature = ForwardSignature.from_callable(Net().forward)
    assert [p.name for p in signature.parameters] == ["x", "scale", "bias"]
    x = torch.ones(1)
    assert signature.normalize((x, 2.0), {}).arguments == signature.normalize((), {"x": x, "scale": 2.0}).arguments
    assert ForwardSignature.from_dict(signature.to_dict()) == signature
    with pytest.raises(TypeError):
        signature.normalize((x, 1.0, 2.0), {})


def test_locator_registration_can_be_undone():
    class Holder:
        def __init__(self):
            self.tensor = torch.ones(2)

    Locator.register_user_type(Holder)
    try:
        assert [loc.display_path for loc, _ in SampleMetadata.from_inputs({"h": Holder()}).tensor_data] == ["h.tensor"]
    finally:
        Locator.unregister_user_type(Holder)
    assert not SampleMetadata.from_inputs({"h": Holder()}).tensor_data  # a plain object is a leaf again
    Locator.ignore_type(Holder)
    Locator.unignore_type(Holder)
