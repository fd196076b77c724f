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


def _major(version: str | None) -> str | None:
    return version.split(".")[0] if version else None


def _ampere_plus(sm: Any) -> bool:
    try:
        return int(str(sm).split(".")[0]) >= 8
    except ValueError:
        return False


def mismatches(saved: dict[str, Any], current: dict[str, Any], requires: list[str], context: str) -> list[tuple]:
    """(component, saved, current, context) for every required field that differs."""
    out = []
    for field in requires:
        if field == "cuda_major":
            a, b = _major(saved.get("cuda_runtime")), _major(current.get("cuda_runtime"))
        elif field == "gpu_sm_ampere_plus":
            # A TensorRT plan built with HardwareCompatibilityLevel.AMPERE_PLUS runs on any SM >= 8.
            field = "gpu_sm"
            a, b = saved.get(field), current.get(field)
            if _ampere_plus(a) and _ampere_plus(b):
                continue
        else:
            a, b = saved.get(field), current.get(field)
        if a != b:
            out.append((field, a, b, context))
    return out
