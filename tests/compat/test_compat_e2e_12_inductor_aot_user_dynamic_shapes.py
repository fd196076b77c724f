"""Scenario 12, written as AITune's functional script 041 is: a ResNet-18 wrapped with user
dynamic shapes (a BatchDim and one spatial DynamicDim on both image axes), tuned with
TorchInductorAotBackend on one 224x224 sample, then serving an unseen 2x3x256x256 batch.
torch.export used to reject the spatial dim ("Constraints violated (spatial)")."""

import pytest
import torch
from compat_models import ResNet18

from aitune.torch import BatchDim, DynamicDim, Module, tune
from aitune.torch.backend.torch_inductor_aot_backend import TorchInductorAotBackend
from aitune.torch.module.wrapper_module import ModuleState
from aitune.torch.module_registry import MODULE_REGISTRY
from aitune.torch.tune_strategy.one_backend_strategy import OneBackendStrategy


def _tune_and_serve_unseen_shape(model: torch.nn.Module, device: torch.device, rtol: float, atol: float) -> None:
    data_224 = torch.randn((3, 224, 224), device=device)
    data_256 = torch.randn((2, 3, 256, 256), device=device)
    with torch.no_grad():
        expected_256 = torch.nn.functional.softmax(model(data_256), dim=1)

    batch = BatchDim("batch", min=1, opt=1, max=2)
    spatial = DynamicDim("spatial", min=224, opt=224, max=256)
    strategy = OneBackendStrategy(TorchInductorAotBackend())
    strategy.enable_performance_validation(False)
    strategy.enable_find_max_batch_size(False)
    try:
        module = Module(
            model, "compat-resnet18-user-dynamic", strategy=strategy, dynamic_shapes={"x": (batch, 3, spatial, spatial)}
        )
        tune(module, [data_224], batch_sizes=[1], device=str(device), dry_run=False, disable_external_logging=False)
        # Without this the numeric check below would compare eager with itself.
        assert module.state == ModuleState.TUNED, f"tuning failed, module state is {module.state}"
        assert type(module.tuned_module.backends[0][1]).__name__ == "TorchInductorAotBackend"
        with torch.no_grad():
            actual_256 = torch.nn.functional.softmax(module(data_256), dim=1)
        torch.testing.assert_close(actual_256, expected_256, rtol=rtol, atol=atol)
    finally:
        MODULE_REGISTRY.clear()


def test_inductor_aot_user_dynamic_spatial_shapes_cpu(aoti_loads):
    torch.manual_seed(0)
    # ResNet-18's topology at a quarter of its width: the strided layers that produced the export
    # guard are the same, the CPU compile is shorter.
    model = ResNet18(width=16).eval()
    _tune_and_serve_unseen_shape(model, torch.device("cpu"), rtol=1e-3, atol=1e-4)


@pytest.mark.gpu
def test_inductor_aot_user_dynamic_spatial_shapes_resnet18_cuda(aoti_loads):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    timm = pytest.importorskip("timm", reason="the GPU machine's image has timm; AITune's script uses it")
    model = timm.create_model("resnet18", pretrained=False).to("cuda").eval()
    _tune_and_serve_unseen_shape(model, torch.device("cuda"), rtol=1e-3, atol=1e-4)
