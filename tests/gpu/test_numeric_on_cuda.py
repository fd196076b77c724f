"""The numeric check on CUDA (docs/reference/validation.md#the-noise-bound): an fp32 model with
torch's default TF32 switches (TF32 convolutions) is judged as tf32 against a float32 reference
without TF32; the defaults tune an fp32 conv net (frozen, channels-last TF32 convolutions round
differently from eager's) and refuse a relative weight error of 1e-2 in the tf32 class."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import aitune.torch as ait
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState
from aitune.torch.task.precise_reference import native_precision_class
from perturbed_backend import PerturbedBackend, PerturbedConfig

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


class ConvNet(torch.nn.Module):
    """A few conv + batch-norm blocks and a linear head: TF32 convolutions under torch's defaults."""

    def __init__(self) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = []
        channels = 3
        for width in (32, 64, 64, 128):
            layers += [torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.BatchNorm2d(width), torch.nn.ReLU()]
            channels = width
        self.features = torch.nn.Sequential(*layers)
        self.head = torch.nn.Linear(channels, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3)))


def _graph_telemetry() -> dict:
    return json.loads(config.tuning_data_output_path.read_text())["modules"][0]["graphs"][0]


@pytest.mark.gpu
@cuda_only
def test_default_tuning_of_an_fp32_conv_net_ends_tuned():
    assert torch.backends.cudnn.allow_tf32, "torch's default: TF32 convolutions"
    torch.manual_seed(0)
    model = ConvNet().cuda().eval()
    assert native_precision_class(model, torch.device("cuda:0")) == "tf32"
    reference = copy.deepcopy(model)
    m = ait.Module(model, "convnet")
    ait.tune(m, [torch.randn(3, 32, 32) for _ in range(4)])  # no options
    graph = _graph_telemetry()
    assert graph["outcome"] == "tuned", graph.get("outcome")
    assert m.state is ModuleState.TUNED
    [(_, backend)] = m.tuned_module.backends
    correctness = next(b["correctness"] for b in graph["builds"] if b.get("correctness"))
    assert correctness["precision_class"] == "tf32"
    assert "rel_l2_vs_precise" in correctness["worst"], "the noise bound applied"
    x = torch.randn(2, 3, 32, 32, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(m(x), reference(x), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@cuda_only
def test_a_relative_weight_error_of_1e_2_is_refused_in_the_tf32_class(aitune_log):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 128)).cuda().eval()
    strategy = ait.OneBackendStrategy(PerturbedBackend(PerturbedConfig(relative_error=1e-2)))
    strategy.enable_performance_validation(False).enable_find_max_batch_size(False)
    m = ait.Module(model, "mlp", strategy=strategy)
    ait.tune(m, [torch.randn(64) for _ in range(8)], batch_sizes=[8])
    assert m.state is not ModuleState.TUNED
    refusals = [r.getMessage() for r in aitune_log.records if "CorrectnessNumericError" in r.getMessage()]
    assert any("precision class tf32" in line for line in refusals), refusals
