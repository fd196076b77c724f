"""Scenario 10: explicit dynamic shapes as AITune's docs show them, their `to_dict()` in a JSON
report, and ValueError for an invalid definition."""

import json

import pytest
import torch

import aitune.torch as ait
from aitune.torch import BatchDim, DynamicDim


class SeqNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 8)

    def forward(self, x, mask):
        return self.proj(x) * mask.unsqueeze(-1)


def test_declared_dims_tune_and_serve_in_range(cpu_eager_strategy):
    batch, seq = BatchDim("batch", min=1, max=4, opt=2), DynamicDim("seq", min=4, max=32)
    shapes = {"x": (batch, seq, 16), "mask": (batch, seq)}
    assert json.loads(
        json.dumps({k: [d.to_dict() if hasattr(d, "to_dict") else d for d in v] for k, v in shapes.items()})
    )["x"][1] == {"type": "DynamicDim", "name": "seq", "min": 4, "max": 32, "opt": None}
    model = SeqNet().eval()
    module = ait.Module(model, "declared", strategy=cpu_eager_strategy, dynamic_shapes=shapes)
    data = [{"x": torch.randn(8, 16), "mask": torch.ones(8)}]
    ait.tune(module, data, batch_sizes=[1, 2], device="cpu")
    x, mask = torch.randn(3, 20, 16), torch.ones(3, 20)
    with torch.no_grad():
        torch.testing.assert_close(module(x, mask), model.proj(x) * mask.unsqueeze(-1))


def test_invalid_definition_is_a_value_error():
    with pytest.raises(ValueError, match="must satisfy min < max"):
        DynamicDim("seq", min=32, max=4)
