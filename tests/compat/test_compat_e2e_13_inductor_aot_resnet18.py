"""Scenario 13, written as AITune's functional script 027 is: timm's ResNet-18 on CUDA, tuned with
`TorchInductorAotBackend()` and its default configuration through `OneBackendStrategy`, without
the performance gate or the batch-size search, at batch sizes [2, 1]. The time it takes is read
from pytest's --durations in `./run gpu` (issue 15, point 13: it did not finish in 110 s)."""

from logging import DEBUG, basicConfig

import pytest
import torch

from aitune.torch import tune
from aitune.torch.backend.torch_inductor_aot_backend import TorchInductorAotBackend, TorchInductorAotBackendConfig
from aitune.torch.module.wrapper_module import Module, ModuleState
from aitune.torch.module_registry import MODULE_REGISTRY
from aitune.torch.tune_strategy.one_backend_strategy import OneBackendStrategy


def do_test(backend: TorchInductorAotBackend, timm) -> None:
    torch.manual_seed(0)
    # As the script does: full-precision convolutions and matmuls, so eager and the package agree closely.
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        device = torch.device("cuda")
        model = timm.create_model("resnet18", pretrained=False).to(device).eval()
        data = torch.randn((3, 224, 224), device=device)
        with torch.no_grad():
            expected = model(data.unsqueeze(0))
        strategy = OneBackendStrategy(backend)
        strategy.enable_performance_validation(False)
        strategy.enable_find_max_batch_size(False)
        module = Module(model, "functional-resnet18", strategy=strategy)
        tune(module, data, batch_sizes=[2, 1], dry_run=False, disable_external_logging=False)
        assert module.state == ModuleState.TUNED
        with torch.no_grad():
            for batch_size in (1, 2):
                batch = data.unsqueeze(0).repeat(batch_size, 1, 1, 1)
                torch.testing.assert_close(module(batch), expected.repeat(batch_size, 1), rtol=1e-3, atol=1e-4)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
        MODULE_REGISTRY.clear()


@pytest.mark.gpu
def test_tune_resnet18_torch_inductor_aot_cuda(aoti_loads):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    timm = pytest.importorskip("timm", reason="AITune's script uses timm; the GPU image has it")
    do_test(TorchInductorAotBackend(config=TorchInductorAotBackendConfig()), timm)


if __name__ == "__main__":
    basicConfig(level=DEBUG, force=True)
    test_tune_resnet18_torch_inductor_aot_cuda(None)
