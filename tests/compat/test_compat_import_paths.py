"""Every name the compatibility issue lists imports from the path AITune documents, and is the
same object as aitune's own (docs/guide.md, "Coming from AITune")."""

import importlib
import typing

import pytest

import aitune.torch as ait
from aitune.torch import backend as ait_backend

# (AITune module path, name, the aitune module whose object of that name it must be)
PATHS = [
    ("aitune.torch.module.wrapper_module", "Module", "aitune.torch.module.wrapper"),
    ("aitune.torch.module.wrapper_module", "ModuleState", "aitune.torch.module.state"),
    ("aitune.torch.backend.torch_inductor_jit_backend", "TorchInductorJitBackend", "aitune.torch.backend"),
    ("aitune.torch.backend.torch_inductor_jit_backend", "TorchInductorJitBackendConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.torch_inductor_aot_backend", "TorchInductorAotBackend", "aitune.torch.backend"),
    ("aitune.torch.backend.torch_inductor_aot_backend", "TorchInductorAotBackendConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.onnx_runtime_backend", "ONNXRuntimeBackend", "aitune.torch.backend"),
    ("aitune.torch.backend.onnx_runtime_backend", "ONNXRuntimeBackendConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.onnx_runtime_backend", "ONNXExecutionProvider", "aitune.torch.backend"),
    ("aitune.torch.backend.torch_tensorrt_aot_backend", "TorchTensorRTAotBackend", "aitune.torch.backend"),
    ("aitune.torch.backend.torch_tensorrt_aot_backend", "TorchTensorRTAotBackendConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.torch_tensorrt_jit_backend", "TorchTensorRTJitBackend", "aitune.torch.backend"),
    ("aitune.torch.backend.torch_tensorrt_jit_backend", "TorchTensorRTJitBackendConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.torch_tensorrt_jit_backend", "TorchTensorRTConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.torchao_backend", "TorchAOBackend", "aitune.torch.backend"),
    ("aitune.torch.backend.torchao_backend", "TorchAOBackendConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.tensorrt.tensorrt_backend", "TensorRTBackend", "aitune.torch.backend"),
    ("aitune.torch.backend.tensorrt.tensorrt_backend", "TensorRTBackendConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.tensorrt.tensorrt_backend", "ProfileMode", "aitune.torch.backend"),
    ("aitune.torch.backend.tensorrt.tensorrt_profile", "TensorRTProfile", "aitune.torch.backend"),
    ("aitune.torch.backend.tensorrt.onnx_autocast", "ONNXAutoCastConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.tensorrt.onnx_quantization", "ONNXQuantizationConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.tensorrt.torch_quantization", "TorchQuantizationConfig", "aitune.torch.backend"),
    ("aitune.torch.backend.torch_eager", "TorchEagerBackend", "aitune.torch.backend"),
    ("aitune.torch.backend", "BuildMode", "aitune.torch.backend.reference_contract"),
    ("aitune.torch.backend", "ExecutionMode", "aitune.torch.backend.reference_contract"),
    ("aitune.torch.backend", "ArtifactPath", "aitune.torch.checkpoint.artifact"),
    ("aitune.torch.checkpoint.artifact", "ArtifactPath", "aitune.torch.checkpoint.artifact"),
    ("aitune.torch", "profile", "aitune.torch.performance.profile"),
    ("aitune.torch", "PerformanceProfile", "aitune.torch.performance.profile"),
    ("aitune.torch.performance", "profile", "aitune.torch.performance.profile"),
    ("aitune.torch", "ModuleFunctionKernelProfiler", "aitune.torch.kernel_forge.module_function_kernel_profiler"),
    ("aitune.torch.tune_strategy.max_throughput_strategy", "MaxThroughputStrategy", "aitune.torch"),
    (
        "aitune.torch.tune_strategy.max_throughput_strategy",
        "MaxThroughputProfilingResult",
        "aitune.torch.tune_strategy.strategy_results",
    ),
    ("aitune.torch.tune_strategy.min_latency_strategy", "MinLatencyStrategy", "aitune.torch"),
    (
        "aitune.torch.tune_strategy.min_latency_strategy",
        "MinLatencyProfilingResult",
        "aitune.torch.tune_strategy.strategy_results",
    ),
    ("aitune.torch.tune_strategy.latency_budget_strategy", "LatencyBudgetStrategy", "aitune.torch"),
    (
        "aitune.torch.tune_strategy.latency_budget_strategy",
        "LatencyBudgetProfilingResult",
        "aitune.torch.tune_strategy.strategy_results",
    ),
    ("aitune.torch.tune_strategy.one_backend_strategy", "OneBackendStrategy", "aitune.torch"),
    ("aitune.torch.tune_strategy.first_wins_strategy", "FirstWinsStrategy", "aitune.torch"),
    ("aitune.torch.inspecting.module_info", "ModuleInfo", "aitune.torch.inspecting"),
    (
        "aitune.torch.task.profiling.profiling_stop_strategy",
        "ThroughputSaturatedProfilingStopStrategy",
        "aitune.torch.task.profiling",
    ),
    (
        "aitune.torch.task.profiling.profiling_stop_strategy",
        "AllSamplesProfilingStopStrategy",
        "aitune.torch.task.profiling",
    ),
    (
        "aitune.torch.task.profiling.measuring_stop_strategy",
        "NumStepsMeasuringStopStrategy",
        "aitune.torch.task.profiling",
    ),
    (
        "aitune.torch.task.profiling.measuring_stop_strategy",
        "StableWindowMeasuringStopStrategy",
        "aitune.torch.task.profiling",
    ),
    (
        "aitune.torch.task.profiling.measuring_strategy",
        "ModelExecutionTimeMeasuringStrategy",
        "aitune.torch.task.profiling",
    ),
    ("aitune.torch.task.profiling.events", "ProfilingResultEvent", "aitune.torch.task.profiling"),
    ("aitune.torch.task.profiling.metrics", "get_throughput", "aitune.torch.task.profiling"),
    ("aitune.torch.task.profiling.config", "ProfilingConfig", "aitune.torch.task.profiling"),
    ("aitune.torch.dataloader", "InputConfig", "aitune.torch.shape_datasets"),
    ("aitune.torch.dataloader", "MinMaxRandomDataset", "aitune.torch.shape_datasets"),
    ("aitune.torch.dataloader", "DynamicShapeDataset", "aitune.torch.shape_datasets"),
    ("aitune.torch.dataloader", "SingleBatchDatasetWrapper", "aitune.torch.dataloader"),
    ("aitune.torch.dataloader", "ensure_enough_samples", "aitune.torch.dataloader"),
    ("aitune.torch.dataloader", "DatasetLike", "aitune.torch.dataloader"),
    ("aitune.torch.checkpoint.local_torch_storage", "LocalTorchStorage", "aitune.torch"),
    ("aitune.torch.jit.patched_module", "PRINT_HIERARCHY_HEADER", "aitune.torch.jit.patched_module"),
    ("aitune.torch.jit.patched_module", "PatchedModule", "aitune.torch"),
    ("aitune.torch.jit.patcher", "Patcher", "aitune.torch.jit.patcher"),
    ("aitune.torch.tune_data.reporting", "snapshot_tuning_data", "aitune.torch"),
    ("aitune.torch.module_registry", "MODULE_REGISTRY", "aitune.torch.module_registry"),
]


def _resolve(spec: str):
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("path", "name", "canonical"), PATHS, ids=[f"{p}.{n}" for p, n, _ in PATHS])
def test_documented_path_imports_the_same_object(path, name, canonical):
    module = importlib.import_module(path)
    assert hasattr(module, name), f"{path} has no {name}"
    assert getattr(module, name) is _resolve(f"{canonical}:{name}")


def test_torch_compile_mode_lists_the_modes_the_inductor_config_accepts():
    from aitune.torch.backend.torch_inductor_jit_backend import TorchInductorJitBackendConfig
    from aitune.torch.libs.torch_compile import TorchCompileMode

    modes = typing.get_args(TorchCompileMode)
    assert modes == ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
    for mode in modes:
        TorchInductorJitBackendConfig(mode=mode)
    with pytest.raises(ValueError, match="Invalid mode"):
        TorchInductorJitBackendConfig(mode="fastest")


def test_top_level_names_of_aitune_0_6():
    for name in (
        "inspect",
        "wrap",
        "tune",
        "load",
        "save",
        "snapshot_tuning_data",
        "ModuleFunctionKernelProfiler",
        "PerformanceProfile",
        "profile",
        "Module",
        "DynamicDim",
        "BatchDim",
        "PatchedModule",
        "TuneStrategy",
        "OneBackendStrategy",
        "FirstWinsStrategy",
        "LatencyBudgetStrategy",
        "MaxThroughputStrategy",
        "MinLatencyStrategy",
        "LocalTorchStorage",
        "DataLoaderFactory",
        "patch_for_jit_tuning",
        "config",
        "jit_config",
        "aitune_cache_dir",
    ):
        assert hasattr(ait, name), f"aitune.torch.{name} is missing"
    assert ait_backend.TorchEagerBackend is _resolve("aitune.torch.backend.torch_eager:TorchEagerBackend")


def test_module_registry_has_aitunes_modules_view():
    import torch

    from aitune.torch.module_registry import MODULE_REGISTRY

    m = ait.Module(torch.nn.Linear(2, 2), "registered")
    assert list(MODULE_REGISTRY.modules.values()) == [m]
    MODULE_REGISTRY.clear()
    assert not MODULE_REGISTRY.modules
