"""Default candidate lists (SPEC §6.2). Every backend is constructed whatever is installed:
construction never fails, and the strategies skip an unavailable candidate with its reason
(`⏭️ backend skipped: …`), so the same lists serve a CPU host and a TensorRT GPU host."""

from __future__ import annotations

from aitune.torch.backend.backend import Backend


def first_wins_defaults() -> list[Backend]:
    from aitune.torch.backend import TensorRTBackend, TensorRTBackendConfig, TorchInductorJitBackend

    return [TensorRTBackend(), TensorRTBackend(TensorRTBackendConfig(use_dynamo=False)), TorchInductorJitBackend()]


def profiling_defaults() -> list[Backend]:
    from aitune.torch.backend import (
        ONNXRuntimeBackend,
        ONNXRuntimeBackendConfig,
        TensorRTBackend,
        TensorRTBackendConfig,
        TorchInductorAotBackend,
        TorchInductorJitBackend,
        TorchTensorRTAotBackend,
        TorchTensorRTJitBackend,
    )

    return [
        TensorRTBackend(),
        TensorRTBackend(TensorRTBackendConfig(use_dynamo=False)),
        TorchInductorJitBackend(),
        TorchInductorAotBackend(),
        TorchTensorRTJitBackend(),
        TorchTensorRTAotBackend(),
        ONNXRuntimeBackend(),
        ONNXRuntimeBackend(ONNXRuntimeBackendConfig(use_dynamo=False)),
    ]
