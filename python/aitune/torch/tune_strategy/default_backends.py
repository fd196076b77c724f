"""Default candidate lists (SPEC §6.2). Backends that are not part of this build yet (TensorRT,
Torch-TensorRT, ONNX Runtime) join these lists in the releases that add them."""

from __future__ import annotations

from aitune.torch.backend.backend import Backend


def first_wins_defaults() -> list[Backend]:
    from aitune.torch.backend import TorchInductorJitBackend

    return [TorchInductorJitBackend()]


def profiling_defaults() -> list[Backend]:
    from aitune.torch.backend import TorchInductorAotBackend, TorchInductorJitBackend

    backends: list[Backend] = [TorchInductorJitBackend(), TorchInductorAotBackend()]
    if _onnxruntime_imports():
        from aitune.torch.backend import ONNXRuntimeBackend, ONNXRuntimeBackendConfig

        # SPEC §6.2: ORT with the dynamo export, then with the TorchScript-trace export
        backends += [ONNXRuntimeBackend(), ONNXRuntimeBackend(ONNXRuntimeBackendConfig(use_dynamo=False))]
    return backends


def _onnxruntime_imports() -> bool:
    """ONNX Runtime is a candidate only where it is installed and loads (SPEC §4.1: building the
    default list never fails; a backend that cannot run is left out or skipped)."""
    try:
        import onnxruntime  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install (missing CUDA libraries) counts as absent
        return False
    return True
