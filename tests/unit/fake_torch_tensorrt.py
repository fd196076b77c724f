"""A recording stand-in for the `torch_tensorrt` package, which cannot be installed on the CPU
test hosts (allowed by the project's testing rules for a missing third-party library). It
records every call aitune makes and serves models eagerly, so our glue (arguments, artifact
save/load, checkpoints) is tested without TensorRT:

* ``dynamo.CompilationSettings``: a dataclass with a few of the real fields (device included);
* ``Input(min_shape, opt_shape, max_shape, dtype, name)``;
* ``dynamo.compile(exported, arg_inputs, kwarg_inputs, **settings)`` returns a module that runs
  the exported program eagerly;
* ``save``/``load`` write and read the program with torch.export.save/load;
* a torch.compile backend named "torch_tensorrt" that records its options and runs the FX graph.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any

import torch
from torch._dynamo.backends import registry


@dataclasses.dataclass
class FakeCompilationSettings:
    workspace_size: int = 0
    enabled_precisions: set = dataclasses.field(default_factory=lambda: {torch.float32})
    use_explicit_typing: bool = True
    min_block_size: int = 5
    device: Any = None


@dataclasses.dataclass
class FakeInput:
    min_shape: Any = None
    opt_shape: Any = None
    max_shape: Any = None
    dtype: Any = None
    name: str = ""


class FakeCompiledModule(torch.nn.Module):
    """What fake dynamo.compile returns: serves the exported program eagerly and keeps it for save()."""

    def __init__(self, exported: Any) -> None:
        super().__init__()
        self.exported = exported
        self.inner = exported.module()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner(*args, **kwargs)


def make_fake_torch_tensorrt() -> types.ModuleType:
    trt = types.ModuleType("torch_tensorrt")
    trt.calls = []  # (name, details) in call order
    dynamo = types.ModuleType("torch_tensorrt.dynamo")
    dynamo.CompilationSettings = FakeCompilationSettings

    def compile(exported: Any, inputs: Any = None, *, arg_inputs: Any = None, kwarg_inputs: Any = None,
                **settings: Any) -> FakeCompiledModule:
        trt.calls.append(("dynamo.compile", {"exported": exported, "arg_inputs": arg_inputs,
                                             "kwarg_inputs": kwarg_inputs, **settings}))
        return FakeCompiledModule(exported)

    def save(module: Any, file_path: str, **kwargs: Any) -> None:
        trt.calls.append(("save", {"module": module, "file_path": file_path, **kwargs}))
        torch.export.save(module.exported, file_path)

    def load(file_path: str) -> Any:
        trt.calls.append(("load", {"file_path": file_path}))
        return torch.export.load(file_path)

    dynamo.compile = compile
    trt.dynamo = dynamo
    trt.Input = FakeInput
    trt.save = save
    trt.load = load
    return trt


def compile_backend(gm: torch.fx.GraphModule, example_inputs: list, options: dict | None = None) -> Any:
    """The fake "torch_tensorrt" torch.compile backend: records the options, runs the graph."""
    trt = sys.modules["torch_tensorrt"]
    trt.calls.append(("torch.compile", {"options": dict(options or {}), "num_inputs": len(example_inputs)}))
    return gm.forward


def install(monkeypatch: Any) -> types.ModuleType:
    """Puts the fake into sys.modules and registers its torch.compile backend, for one test."""
    trt = make_fake_torch_tensorrt()
    monkeypatch.setitem(sys.modules, "torch_tensorrt", trt)
    monkeypatch.setitem(sys.modules, "torch_tensorrt.dynamo", trt.dynamo)
    monkeypatch.setitem(registry._BACKENDS, "torch_tensorrt", None)
    monkeypatch.setitem(registry._COMPILER_FNS, "torch_tensorrt", compile_backend)
    return trt


def calls_named(trt: types.ModuleType, name: str) -> list[dict]:
    return [details for call, details in trt.calls if call == name]
