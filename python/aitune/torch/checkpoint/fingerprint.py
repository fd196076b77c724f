"""The environment fingerprint saved in checkpoints and compared on load
(docs/reference/checkpoint.md#integrity-and-compatibility)."""

from __future__ import annotations

import importlib.metadata
import json
import platform
from typing import Any

import torch

from aitune._native import _C
from aitune.tensorrt_install import tensorrt_version


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def current_fingerprint(device: torch.device | None = None) -> dict[str, Any]:
    native = json.loads(_C.environment_report()[0])
    index = device.index if device is not None and device.type == "cuda" and device.index is not None else 0
    gpu = next((g for g in native["gpus"] if g["index"] == index), None)
    return {
        "gpu_name": gpu["name"] if gpu else None,
        "gpu_sm": gpu["sm"] if gpu else None,
        "driver_version": native["driver_version"] or None,
        "cuda_runtime": torch.version.cuda,
        "torch": torch.__version__,
        "tensorrt": tensorrt_version(),  # the module's, not a distribution's (aitune.tensorrt_install)
        "torch_tensorrt": _version("torch-tensorrt"),
        "onnxruntime": _version("onnxruntime") or _version("onnxruntime-gpu"),
        "platform": f"{platform.system().lower()}-{platform.machine()}",
    }


def mismatches(saved: dict[str, Any], current: dict[str, Any], requires: list[str], context: str) -> list[tuple]:
    """(component, saved, current, context) for every required field that differs.

    The comparison is the C++ core's (`_C.fingerprint_mismatches`), which the C++ runtime applies
    too: `cuda_major` compares the CUDA runtime's major, `gpu_sm_ampere_plus` passes any SM >= 8
    on both sides (reported as `gpu_sm`), `torch` ignores the local suffix (`+cu130`), other
    fields compare exactly (docs/reference/checkpoint.md#integrity-and-compatibility)."""
    return [(field, a, b, context) for field, a, b in _C.fingerprint_mismatches(saved, current, list(requires))]
