"""Default candidate lists (docs/guide.md, "Strategies"). Every backend is constructed whatever
is installed: construction never fails, and the strategies skip an unavailable candidate with its
reason (`⏭️ backend skipped: …`), so the same lists serve a CPU host and a TensorRT GPU host.

On CUDA the lists lead with CUDA-graph variants: at small batch sizes a GPU model is bound by
kernel launches, so a compiled backend without CUDA graphs rarely beats eager there, and every
candidate used to fail the gate. A graph variant and its plain sibling share one build (see
siblings.py), so listing both costs one build, not two."""

from __future__ import annotations


import torch

from aitune.torch.backend.backend import Backend, BackendConfig
from aitune.torch.backend import (
    TensorRTBackend,
    TensorRTBackendConfig,
    TorchEagerBackend,
    TorchEagerBackendConfig,
    TorchInductorAotBackend,
    TorchInductorAotBackendConfig,
    TorchInductorJitBackend,
    TorchInductorJitBackendConfig,
)
from aitune.torch.backend import (
    ONNXRuntimeBackend,
    ONNXRuntimeBackendConfig,
    TorchTensorRTAotBackend,
    TorchTensorRTAotBackendConfig,
    TorchTensorRTJitBackend,
    TorchTensorRTJitBackendConfig,
)


def _on_cuda(device: torch.device | str | None) -> bool:
    return device is not None and torch.device(device).type == "cuda"


def first_wins_defaults(device: torch.device | str | None = None) -> list[Backend]:
    """TensorRT (dynamo export), TensorRT (trace export), then Inductor JIT. On CUDA: the same
    TensorRT pair with CUDA graphs, Inductor JIT with `freezing` (the fastest Inductor variant
    across the benchmark zoo at a default build time, docs/guide.md "Strategies"), Inductor JIT,
    Inductor AOT and eager with CUDA graphs (the fallbacks if a frozen build fails), then Inductor
    JIT without CUDA graphs (for forwards that cannot be captured)."""
    if not _on_cuda(device):
        return [TensorRTBackend(), TensorRTBackend(TensorRTBackendConfig(use_dynamo=False)), TorchInductorJitBackend()]
    return [
        TensorRTBackend(TensorRTBackendConfig(use_cuda_graphs=True)),
        TensorRTBackend(TensorRTBackendConfig(use_dynamo=False, use_cuda_graphs=True)),
        TorchInductorJitBackend(TorchInductorJitBackendConfig(use_cuda_graphs=True, freezing=True)),
        TorchInductorJitBackend(TorchInductorJitBackendConfig(use_cuda_graphs=True)),
        TorchInductorAotBackend(TorchInductorAotBackendConfig(use_cuda_graphs=True)),
        TorchEagerBackend(TorchEagerBackendConfig(use_cuda_graphs=True)),
        TorchInductorJitBackend(),
    ]


# Inductor settings the profiling strategies also try on CUDA, each as its own build (serving
# siblings: with and without CUDA graphs), in order of build cost: freezing; freezing with
# coordinate-descent tuning of the generated kernels; max-autotune's GEMM/convolution templates
# (under aitune's CUDA graphs, so the mode without Inductor's own) with freezing.
INDUCTOR_SEARCH: tuple[dict[str, object], ...] = (
    {"freezing": True},
    {"freezing": True, "coordinate_descent_tuning": True},
    {"mode": "max-autotune-no-cudagraphs", "freezing": True},
)


def profiling_defaults(device: torch.device | str | None = None) -> list[Backend]:
    """Every backend family; on CUDA also the Inductor JIT settings of INDUCTOR_SEARCH, each as its
    CUDA-graph variant followed by its plain sibling, then eager with CUDA graphs."""
    families: list[tuple[type[Backend], type[BackendConfig], dict[str, object]]] = [
        (TensorRTBackend, TensorRTBackendConfig, {}),
        (TensorRTBackend, TensorRTBackendConfig, {"use_dynamo": False}),
        (TorchInductorJitBackend, TorchInductorJitBackendConfig, {}),
        (TorchInductorAotBackend, TorchInductorAotBackendConfig, {}),
        (TorchTensorRTJitBackend, TorchTensorRTJitBackendConfig, {}),
        (TorchTensorRTAotBackend, TorchTensorRTAotBackendConfig, {}),
        (ONNXRuntimeBackend, ONNXRuntimeBackendConfig, {}),
        (ONNXRuntimeBackend, ONNXRuntimeBackendConfig, {"use_dynamo": False}),
    ]
    if not _on_cuda(device):
        return [backend(config(**fields)) for backend, config, fields in families]
    jit = families.index((TorchInductorJitBackend, TorchInductorJitBackendConfig, {}))
    families[jit + 1 : jit + 1] = [
        (TorchInductorJitBackend, TorchInductorJitBackendConfig, settings) for settings in INDUCTOR_SEARCH
    ]
    backends: list[Backend] = []
    for backend, config, fields in families:
        backends.append(backend(config(**fields, use_cuda_graphs=True)))
        backends.append(backend(config(**fields)))
    backends.append(TorchEagerBackend(TorchEagerBackendConfig(use_cuda_graphs=True)))
    return backends
