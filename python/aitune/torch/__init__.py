"""aitune for PyTorch: ``import aitune.torch as ait`` (docs/reference/api.md#top-level-names)."""

from aitune._native import _C  # noqa: F401 - fails early with a clear message on a torch mismatch
from aitune.torch import backend, tune_strategy
from aitune.torch.checkpoint.load import load
from aitune.torch.checkpoint.save import save
from aitune.torch.checkpoint.storage import LocalTorchStorage
from aitune.torch.config import aitune_cache_dir, config
from aitune.torch.dataloader import DataLoaderFactory
from aitune.torch.graph.dynamic_shapes import BatchDim, DynamicDim
from aitune.torch.inspecting import InspectedModulesInfo, inspect, wrap
from aitune.torch.jit.config import config as jit_config
from aitune.torch.jit.patched_module import PatchedModule
from aitune.torch.jit.patcher import patch_for_jit_tuning
from aitune.torch.backend.kernels.module_function_kernel_profiler import ModuleFunctionKernelProfiler
from aitune.torch.module.wrapper import Module
from aitune.torch.performance import PerformanceProfile, profile
from aitune.torch.tune_strategy import (
    FirstWinsStrategy,
    LatencyBudgetStrategy,
    MaxThroughputStrategy,
    MinLatencyStrategy,
    OneBackendStrategy,
    TuneStrategy,
)
from aitune.torch.tune_data import snapshot_tuning_data
from aitune.torch.tuning import tune

__all__ = [
    "BatchDim",
    "DataLoaderFactory",
    "DynamicDim",
    "FirstWinsStrategy",
    "InspectedModulesInfo",
    "LocalTorchStorage",
    "LatencyBudgetStrategy",
    "MaxThroughputStrategy",
    "MinLatencyStrategy",
    "Module",
    "ModuleFunctionKernelProfiler",
    "PatchedModule",
    "PerformanceProfile",
    "OneBackendStrategy",
    "TuneStrategy",
    "aitune_cache_dir",
    "backend",
    "config",
    "inspect",
    "jit_config",
    "load",
    "patch_for_jit_tuning",
    "profile",
    "save",
    "snapshot_tuning_data",
    "tune",
    "tune_strategy",
    "wrap",
]
