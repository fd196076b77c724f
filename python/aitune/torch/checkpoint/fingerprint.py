"""The environment fingerprint saved in checkpoints and compared on load
(docs/reference/checkpoint.md#integrity-and-compatibility)."""

from __future__ import annotations

import importlib.metadata

import torch

from aitune._native import _C
from aitune.tensorrt_install import tensorrt_version


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def current_fingerprint(device: torch.device | None = None) -> dict[str, str | None]:
    """The environment's fingerprint for `device`'s GPU (the first one by default), built by the
    C++ core's one builder (cpp/core/checkpoint/fingerprint.h), which the C++ runtime uses too;
    Python adds what only it knows: torch's own version string and its packages' versions."""
    index = device.index if device is not None and device.type == "cuda" and device.index is not None else 0
    return _C.current_fingerprint(
        index,
        torch.__version__,
        torch.version.cuda,
        tensorrt_version(),  # the module's, not a distribution's (aitune.tensorrt_install)
        _version("torch-tensorrt"),
        _version("onnxruntime") or _version("onnxruntime-gpu"),
    )


def mismatches(
    saved: dict[str, str | None], current: dict[str, str | None], requires: list[str], context: str
) -> list[tuple]:
    """(component, saved, current, context) for every required field that differs.

    The comparison is the C++ core's (`_C.fingerprint_mismatches`), which the C++ runtime applies
    too: `cuda_major` compares the CUDA runtime's major, `gpu_sm_ampere_plus` passes any SM >= 8
    on both sides (reported as `gpu_sm`), `torch` ignores the local suffix (`+cu130`), other
    fields compare exactly (docs/reference/checkpoint.md#integrity-and-compatibility)."""
    return [(field, a, b, context) for field, a, b in _C.fingerprint_mismatches(saved, current, list(requires))]
