"""Scenario 6, written as AITune's functional script 007 is: `inspect` a ResNet and read its
ModuleInfo (name, module_type, total and average execution time)."""

import pytest
import torch
from compat_models import ResNet18

from aitune.torch import inspect


def check_inspect(model, data):
    modules_info = inspect(model, data)
    modules_info.describe()
    assert len(modules_info.get_modules()) == 1
    module_info = modules_info.get_modules()[0]
    assert module_info.name == model.__class__.__name__
    assert module_info.module_type is type(model)
    assert module_info.total_execution_time > 0
    assert module_info.average_execution_time > 0
    assert module_info.execution_count == 10 and module_info.forward_called
    assert module_info.num_parameters == sum(p.numel() for p in model.parameters())
    assert module_info.output_types[-1] == {"type": "Tensor"}


def test_inspect_resnet18_cpu():
    check_inspect(ResNet18(width=8).eval(), torch.randn((3, 224, 224)))


@pytest.mark.gpu
def test_inspect_resnet50_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    timm = pytest.importorskip("timm", reason="AITune's script uses timm; the GPU image has it")
    model = timm.create_model("resnet50", pretrained=False).to("cuda").eval()
    check_inspect(model, torch.randn((3, 224, 224), device="cuda"))


if __name__ == "__main__":
    test_inspect_resnet18_cpu()
