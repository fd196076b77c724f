"""DynamicDim / BatchDim as AITune documents them: to_dict(), and invalid values raise ValueError
(aitune's InvalidValueError is also an AITuneUserInputError)."""

import json

import pytest

from aitune.exceptions import AITuneUserInputError, InvalidValueError
from aitune.torch import BatchDim, DynamicDim


def test_to_dict_names_the_kind_and_bounds():
    assert BatchDim("batch", min=1, opt=2, max=4).to_dict() == {
        "type": "BatchDim",
        "name": "batch",
        "min": 1,
        "max": 4,
        "opt": 2,
    }
    spatial = DynamicDim("spatial", 224, 512)
    assert spatial.to_dict() == {"type": "DynamicDim", "name": "spatial", "min": 224, "max": 512, "opt": None}
    json.dumps([spatial.to_dict()])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("x", 5, 3), "Dynamic dimension 'x' must satisfy min < max, got min=5, max=3."),
        (("x", 0, 3), "Dynamic dimension 'x' bounds must be positive integers, got min=0, max=3."),
        (("x", 1, 3, 7), "Dynamic dimension 'x' must satisfy min <= opt <= max, got min=1, opt=7, max=3."),
        (("x", 1.5, 3), "Dynamic dimension 'x' field min must be an int, got 1.5."),
        (("", 1, 2), "Dynamic dimension name must be a non-empty string"),
    ],
)
def test_invalid_dimension_raises_value_error(args, message):
    for cls in (DynamicDim, BatchDim):
        with pytest.raises(ValueError) as info:
            cls(*args)
        assert str(info.value).startswith(message)
        assert isinstance(info.value, (InvalidValueError, AITuneUserInputError))
