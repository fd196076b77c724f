"""Default candidate lists (SPEC §6.2). Backends that are not part of this build yet (TensorRT,
Torch-TensorRT, ONNX Runtime) join these lists in the releases that add them."""

from __future__ import annotations

from aitune.torch.backend.backend import Backend


def first_wins_defaults() -> list[Backend]:
    from aitune.torch.backend import TorchInductorJitBackend

    return [TorchInductorJitBackend()]


def profiling_defaults() -> list[Backend]:
    from aitune.torch.backend import TorchInductorAotBackend, TorchInductorJitBackend

    return [TorchInductorJitBackend(), TorchInductorAotBackend()]
