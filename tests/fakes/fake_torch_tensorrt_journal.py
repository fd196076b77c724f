"""The journal of the fake torch_tensorrt: with AITUNE_TORCH_TENSORRT_JOURNAL=<folder>, every call
aitune makes to the fake is written to <folder> as one pickle (exported programs as .pt2 files
next to it), so the conformance tier can replay the calls against the real Torch-TensorRT in
another process. Values are stored as plain data: Inputs and tensors by their description, ops by
name."""

from __future__ import annotations

import dataclasses
import os
import pickle
import uuid
from pathlib import Path
from typing import Any

import torch

ENV = "AITUNE_TORCH_TENSORRT_JOURNAL"


def record(call: str, **payload: Any) -> None:
    folder = os.environ.get(ENV)
    if not folder:
        return
    entry = uuid.uuid4().hex
    data = {
        "call": call,
        "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
        **{name: encode(value, Path(folder), f"{entry}-{name}") for name, value in payload.items()},
    }
    (Path(folder) / f"{entry}.pkl").write_bytes(pickle.dumps(data))


def encode(value: Any, folder: Path, stem: str) -> Any:
    if isinstance(value, torch.export.ExportedProgram):
        torch.export.save(value, folder / f"{stem}.pt2")
        return ("ExportedProgram", f"{stem}.pt2")
    if type(value).__name__ == "Input" and dataclasses.is_dataclass(value):
        return ("Input", {f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            "CompilationSettings",
            {f.name: encode(getattr(value, f.name), folder, stem) for f in dataclasses.fields(value)},
        )
    if isinstance(value, torch.Tensor):
        return ("Tensor", tuple(value.shape), value.dtype)
    if isinstance(value, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return ("op", str(value))
    if isinstance(value, tuple):
        return ("tuple", [encode(v, folder, stem) for v in value])
    if isinstance(value, (set, frozenset)):
        return ("set", [encode(v, folder, stem) for v in value])
    if isinstance(value, list):
        return [encode(v, folder, stem) for v in value]
    if isinstance(value, dict):
        return {k: encode(v, folder, stem) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype, torch.device)):
        return value
    return ("unknown", type(value).__qualname__, repr(value))
