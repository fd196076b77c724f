"""Scenario 5, written as AITune's functional script 040 is: the three profiling strategies from
their AITune modules, tuning with two backends, then `r.metric` and `r.baseline_metric` of
`strategy.perf_validation_results`; describe() in AITune's form. On the CPU the candidates are
ONNX Runtime (CPU provider) and eager; on the GPU, as in 040, Inductor JIT and eager on ResNet-18."""

from functools import partial
from logging import DEBUG, basicConfig

import pytest
import torch
from compat_models import ResNet18

from aitune.torch.backend.onnx_runtime_backend import ONNXRuntimeBackend, ONNXRuntimeBackendConfig
from aitune.torch.backend.torch_eager import TorchEagerBackend
from aitune.torch.backend.torch_inductor_jit_backend import TorchInductorJitBackend
from aitune.torch.module.wrapper_module import Module
from aitune.torch.module_registry import MODULE_REGISTRY
from aitune.torch.task.profiling.config import ProfilingConfig
from aitune.torch.task.profiling.measuring_stop_strategy import NumStepsMeasuringStopStrategy
from aitune.torch.tune_strategy.latency_budget_strategy import LatencyBudgetStrategy
from aitune.torch.tune_strategy.max_throughput_strategy import MaxThroughputStrategy
from aitune.torch.tune_strategy.min_latency_strategy import MinLatencyStrategy
from aitune.torch.tuning import tune

STRATEGIES = [
    (MaxThroughputStrategy, "functional-resnet18-max-throughput"),
    (MinLatencyStrategy, "functional-resnet18-min-latency"),
    (partial(LatencyBudgetStrategy, latency_budget_ms=1000.0), "functional-resnet18-latency-budget"),
]


def run_strategy(strategy_factory, module_name, backends, model, device, batch_sizes, **strategy_kwargs):
    data = torch.randn((3, 224, 224), device=device)
    sample = data.unsqueeze(0)
    with torch.no_grad():
        expected = torch.nn.functional.softmax(model(sample)[0], dim=0)
    strategy = strategy_factory(backends=backends, **strategy_kwargs)
    assert strategy.describe().splitlines()[0].startswith("name: ")
    module = Module(model, module_name, strategy=strategy)
    try:
        tune(module, data, batch_sizes=batch_sizes, device=str(device), dry_run=False, disable_external_logging=False)
        with torch.no_grad():
            actual = torch.nn.functional.softmax(module(sample)[0], dim=0)
        torch.testing.assert_close(actual, expected, rtol=1e-2, atol=1e-2)
        assert len(strategy.perf_validation_results) > 0
        assert all(r.metric > 0 for r in strategy.perf_validation_results)
        assert all(r.baseline_metric > 0 for r in strategy.perf_validation_results)
    finally:
        MODULE_REGISTRY.clear()


@pytest.mark.parametrize(("strategy_factory", "module_name"), STRATEGIES, ids=[n for _, n in STRATEGIES])
def test_profiling_strategy_resnet18_cpu(strategy_factory, module_name):
    pytest.importorskip("onnxruntime", reason="the CPU candidates include ONNX Runtime")
    torch.manual_seed(0)
    backends = [ONNXRuntimeBackend(ONNXRuntimeBackendConfig(execution_provider="cpu")), TorchEagerBackend()]
    # A short measurement: the CPU suite has a time budget; the GPU test below uses the defaults.
    quick = ProfilingConfig(batch_sizes=[1, 2], measurement_stop_strategy=NumStepsMeasuringStopStrategy(5, 2))
    run_strategy(
        strategy_factory,
        module_name,
        backends,
        ResNet18(width=8).eval(),
        torch.device("cpu"),
        [1, 2],
        profiling_config=quick,
    )


@pytest.mark.gpu
@pytest.mark.parametrize(("strategy_factory", "module_name"), STRATEGIES, ids=[n for _, n in STRATEGIES])
def test_profiling_strategy_resnet18_cuda(strategy_factory, module_name):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    timm = pytest.importorskip("timm", reason="AITune's script uses timm; the GPU image has it")
    model = timm.create_model("resnet18", pretrained=False).to("cuda").eval()
    run_strategy(
        strategy_factory,
        module_name,
        [TorchInductorJitBackend(), TorchEagerBackend()],
        model,
        torch.device("cuda"),
        [1, 2, 4],
    )


if __name__ == "__main__":
    basicConfig(level=DEBUG, force=True)
    for factory, name in STRATEGIES:
        test_profiling_strategy_resnet18_cpu(factory, name)
