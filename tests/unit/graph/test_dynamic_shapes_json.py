"""A checkpoint's `dynamic_shapes` back into the user's definition (graph/dynamic_shapes.py from_json)."""

from __future__ import annotations

import json

import pytest

from aitune.torch.graph.dynamic_shapes import BatchDim, DynamicDim, from_json, to_json


def test_round_trip_keeps_paths_kinds_and_ranges():
    shapes = {
        "x": (BatchDim("batch", 1, 64), 3, DynamicDim("h", 32, 512, 224), DynamicDim("w", 32, 512)),
        ("options", "mask"): (BatchDim("batch", 1, 64), DynamicDim("seq", 1, 128)),
    }
    back = from_json(json.loads(json.dumps(to_json(shapes))))
    assert back == shapes
    assert type(back["x"][0]) is BatchDim and type(back["x"][2]) is DynamicDim
    assert from_json(None) is None


@pytest.mark.parametrize(
    ("data", "names"),
    [
        ({"x": []}, "expected a list"),
        ([["x", [1]]], "dynamic_shapes[0]"),
        ([{"path": "x", "shape": [1], "extra": 0}], "dynamic_shapes[0]"),
        ([{"path": 3, "shape": [1]}], "dynamic_shapes[0].path"),
        ([{"path": ["a", True], "shape": [1]}], "dynamic_shapes[0].path"),
        ([{"path": "x", "shape": ["3"]}], "dynamic_shapes[0].shape"),
        ([{"path": "x", "shape": [{"kind": "other", "name": "b", "min": 1, "max": 2, "opt": None}]}], "kind"),
        ([{"path": "x", "shape": [{"kind": "dim", "name": "h", "min": 9, "max": 2, "opt": None}]}], "dynamic_shapes"),
        ([{"path": "x", "shape": [{"kind": "dim", "name": "h", "min": "1", "max": 2, "opt": None}]}], "dynamic_shapes"),
    ],
)
def test_a_damaged_entry_is_a_value_error_naming_it(data, names):
    with pytest.raises(ValueError) as info:
        from_json(data)
    assert type(info.value) is ValueError  # not a user-input error: the loader reports a corrupt file
    assert names in str(info.value)
