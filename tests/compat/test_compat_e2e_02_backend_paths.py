"""Scenario 2, written as AITune's functional script 031 is: backends imported from AITune's
module paths (`aitune.torch.backend.onnx_runtime_backend`, the TensorRT group's modules),
configured, tuned and served. ONNX Runtime runs on the CPU here; the TensorRT and
Torch-TensorRT configurations are built as AITune's scripts build them (the engines need a GPU
with TensorRT, which is covered by the seed tests)."""

from logging import DEBUG, basicConfig, getLogger

import pytest
import torch

from aitune.torch import tune
from aitune.torch.backend.onnx_runtime_backend import (
    ONNXExecutionProvider,
    ONNXRuntimeBackend,
    ONNXRuntimeBackendConfig,
)
from aitune.torch.backend.tensorrt.onnx_autocast import ONNXAutoCastConfig
from aitune.torch.backend.tensorrt.onnx_quantization import ONNXQuantizationConfig
from aitune.torch.backend.tensorrt.tensorrt_backend import ProfileMode, TensorRTBackend, TensorRTBackendConfig
from aitune.torch.backend.tensorrt.tensorrt_profile import TensorRTProfile
from aitune.torch.backend.tensorrt.torch_quantization import TorchQuantizationConfig
from aitune.torch.backend.torch_inductor_aot_backend import TorchInductorAotBackendConfig
from aitune.torch.backend.torch_inductor_jit_backend import TorchInductorJitBackend, TorchInductorJitBackendConfig
from aitune.torch.backend.torch_tensorrt_aot_backend import TorchTensorRTAotBackend, TorchTensorRTAotBackendConfig
from aitune.torch.backend.torch_tensorrt_jit_backend import (
    TorchTensorRTConfig,
    TorchTensorRTJitBackend,
    TorchTensorRTJitBackendConfig,
)
from aitune.torch.module.wrapper_module import Module, ModuleState
from aitune.torch.module_registry import MODULE_REGISTRY
from aitune.torch.tune_strategy.one_backend_strategy import OneBackendStrategy

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
logger = getLogger(__name__)


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1)
        )
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def do_test(backend: ONNXRuntimeBackend) -> None:
    torch.manual_seed(0)
    model = ConvNet().eval()
    data = torch.randn((3, 32, 32))
    with torch.no_grad():
        expected_probs = torch.nn.functional.softmax(model(data.unsqueeze(0))[0], dim=0)
    strategy = OneBackendStrategy(backend)
    strategy.enable_performance_validation(False)
    module = Module(model, "functional-convnet-onnx", strategy=strategy)
    tune(
        module,
        data,
        batch_sizes=[2, 1],
        device="cpu",
        dry_run=False,
        disable_external_logging=False,
        ignore_failing_modules=False,
    )
    assert module.state == ModuleState.TUNED
    assert isinstance(module.tuned_module.backends[0][1], ONNXRuntimeBackend)
    with torch.no_grad():
        actual_probs = torch.nn.functional.softmax(module(data.unsqueeze(0))[0], dim=0)
    torch.testing.assert_close(actual_probs, expected_probs, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    "config",
    [
        ONNXRuntimeBackendConfig(execution_provider=ONNXExecutionProvider.CPU),
        ONNXRuntimeBackendConfig(use_dynamo=False, execution_provider="cpu"),
    ],
    ids=["dynamo", "trace"],
)
def test_tune_convnet_onnx_runtime(config):
    try:
        logger.info("Testing config: %s", config.describe() or "default")
        do_test(ONNXRuntimeBackend(config=config))
    finally:
        MODULE_REGISTRY.clear()


def test_backend_configurations_from_aitunes_paths():
    profile = TensorRTProfile().add_input_shape("x", (1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))
    configs = [
        TensorRTBackendConfig(use_dynamo=False, profiles=[profile], use_cuda_graphs=True),
        TensorRTBackendConfig(profiles=ProfileMode.SINGLE, quantization_config=ONNXAutoCastConfig(precision="fp16")),
        TensorRTBackendConfig(quantization_config=ONNXQuantizationConfig(precision="int8", calibration_method="max")),
        TensorRTBackendConfig(quantization_config=TorchQuantizationConfig(quantization_config="FP8_DEFAULT_CFG")),
    ]
    backends = [TensorRTBackend(config=c) for c in configs] + [
        TorchTensorRTJitBackend(
            config=TorchTensorRTJitBackendConfig(compile_config=TorchTensorRTConfig(enabled_precisions={torch.float16}))
        ),
        TorchTensorRTAotBackend(config=TorchTensorRTAotBackendConfig()),
        TorchInductorJitBackend(config=TorchInductorJitBackendConfig(mode="max-autotune-no-cudagraphs")),
    ]
    assert backends[0].describe().startswith("TensorRTBackend(use_dynamo=False, profiles=")
    assert "ONNXAutoCastConfig(precision='fp16'" in backends[1].describe()
    aot = TorchInductorAotBackendConfig(inductor_configs={"max_autotune": True})
    assert aot.inductor_configs == {"max_autotune": True}
    # Constructing never fails for a missing package; availability says why (docs/guide.md).
    for backend in backends:
        available, reason = backend.is_available()
        assert available or reason


if __name__ == "__main__":
    basicConfig(level=DEBUG, force=True)
    test_tune_convnet_onnx_runtime(ONNXRuntimeBackendConfig(execution_provider=ONNXExecutionProvider.CPU))
