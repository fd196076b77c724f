"""AITune's names behave as AITune's users rely on beyond importing (the paths themselves are
checked against the census in test_compat_aitune_paths.py; docs/guide.md, "Coming from AITune")."""

import typing

import pytest

import aitune.torch as ait
from aitune.torch import backend as ait_backend


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
    from aitune.torch.backend.torch_eager import TorchEagerBackend

    assert ait_backend.TorchEagerBackend is TorchEagerBackend


def test_module_registry_has_aitunes_modules_view():
    import torch

    from aitune.torch.module_registry import MODULE_REGISTRY

    m = ait.Module(torch.nn.Linear(2, 2), "registered")
    assert list(MODULE_REGISTRY.modules.values()) == [m]
    MODULE_REGISTRY.clear()
    assert not MODULE_REGISTRY.modules
