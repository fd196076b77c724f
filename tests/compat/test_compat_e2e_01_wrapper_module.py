"""Scenario 1, written as AITune's functional scripts 023 and 010 are: `Module` and
`ModuleState` from `aitune.torch.module.wrapper_module`, tune, then save and load through
`aitune.torch.tuning`."""

from logging import DEBUG, basicConfig

import pytest
import torch
from compat_models import ResNet18

from aitune.torch import tune
from aitune.torch.backend.torch_eager import TorchEagerBackend, TorchEagerBackendConfig
from aitune.torch.module.wrapper_module import Module, ModuleState
from aitune.torch.module_registry import MODULE_REGISTRY
from aitune.torch.tune_strategy.one_backend_strategy import OneBackendStrategy
from aitune.torch.tuning import load, save


def do_test(backend, device: torch.device, model_factory, tmp_path) -> None:
    torch.manual_seed(0)
    model = model_factory().to(device).eval()
    data = torch.randn((3, 224, 224), device=device)
    with torch.inference_mode():
        expected_probs = torch.nn.functional.softmax(model(data.unsqueeze(0))[0], dim=0)

    strategy = OneBackendStrategy(backend)
    strategy.enable_find_max_batch_size(enable=False)
    module = Module(model, "functional-resnet18", strategy=strategy)
    assert module.state == ModuleState.INIT
    tune(module, data, batch_sizes=[2, 1], device=str(device), dry_run=False, disable_external_logging=False)
    assert module.state == ModuleState.TUNED
    with torch.no_grad():
        actual_probs = torch.nn.functional.softmax(module(data.unsqueeze(0))[0], dim=0)
    torch.testing.assert_close(actual_probs, expected_probs, rtol=1e-4, atol=1e-5)

    output_path = tmp_path / "top_model_test.pt"
    save(module, output_path)
    fresh = model_factory().to(device).eval()
    fresh.load_state_dict({k: v for k, v in model.state_dict().items()}, strict=False)
    loaded = load(fresh, output_path, disable_external_logging=False)
    assert loaded.state == ModuleState.TUNED
    with torch.no_grad():
        torch.testing.assert_close(
            torch.nn.functional.softmax(loaded(data.unsqueeze(0))[0], dim=0), expected_probs, rtol=1e-4, atol=1e-5
        )


def test_tune_resnet_torch_eager(tmp_path):
    try:
        do_test(
            TorchEagerBackend(config=TorchEagerBackendConfig()),
            torch.device("cpu"),
            lambda: ResNet18(width=8),
            tmp_path,
        )
    finally:
        MODULE_REGISTRY.clear()


@pytest.mark.gpu
def test_tune_resnet18_torch_eager_cuda(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    timm = pytest.importorskip("timm", reason="AITune's script uses timm; the GPU image has it")
    try:
        do_test(
            TorchEagerBackend(), torch.device("cuda"), lambda: timm.create_model("resnet18", pretrained=False), tmp_path
        )
    finally:
        MODULE_REGISTRY.clear()


if __name__ == "__main__":
    import tempfile
    from pathlib import Path

    basicConfig(level=DEBUG, force=True)
    with tempfile.TemporaryDirectory() as tmp:
        test_tune_resnet_torch_eager(Path(tmp))
