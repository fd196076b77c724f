"""A recording stand-in for the `torch_tensorrt` package, which cannot run on the CPU test hosts
(allowed by the project's testing rules for a missing third-party library). It records every call
aitune makes and serves models eagerly, so the glue (arguments, artifact save/load, checkpoints) is
tested without TensorRT. It refuses what Torch-TensorRT 2.11 refuses (fake_torch_tensorrt_checks.py
holds those checks; the conformance tier in tests/conformance runs the real library on every call
recorded here and compares the refusals):

* ``dynamo.CompilationSettings``: the real class's 51 fields and defaults, unknown keywords refused;
* ``Input(min_shape, opt_shape, max_shape, dtype, name)``;
* ``dynamo.compile(exported, arg_inputs, kwarg_inputs, **settings)`` checks its arguments as 2.11
  does and returns a GraphModule (as the real one does) that runs the exported program eagerly and
  holds a ``TorchTensorRTModule`` child per engine, as the real one holds its engines;
* ``save``/``load`` check as 2.11 does and write and read the program with torch.export.save/load;
* a torch.compile backend named "torch_tensorrt" that checks and records its options and returns
  the FX graph with an engine child.

Engine builds fail while ``ENGINE_BUILDS_FAIL`` is True (tests set it with monkeypatch.setattr): as in 2.11, the torch.compile backend then
returns the graph itself (a PyTorch fallback, no engine) unless ``pass_through_build_failures`` is
set, when it raises; ``dynamo.compile`` partitions everything to PyTorch (a ``_run_on_gpu_0`` child,
no engine), what 2.11 returns when min_block_size or torch_executed_ops leave TensorRT nothing.

With ``AITUNE_TORCH_TENSORRT_JOURNAL=<folder>`` every call is also written there (journal.py), for
the conformance tier to replay against the real library.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any

import fake_torch_tensorrt_checks as checks
import torch
from fake_torch_tensorrt_journal import record
from torch._dynamo.backends import registry

from aitune.torch.backend.common.torch_tensorrt_config import CompilationSettingsStandIn


def _settings_class() -> type:
    """A dataclass with the real fields and defaults (those of aitune's stand-in, which the
    conformance tier checks against the real class); construction is recorded."""
    fields = []
    for f in dataclasses.fields(CompilationSettingsStandIn):
        default = (
            dataclasses.field(default_factory=f.default_factory)
            if f.default is dataclasses.MISSING
            else dataclasses.field(default=f.default)
        )
        fields.append((f.name, f.type, default))
    cls = dataclasses.make_dataclass("CompilationSettings", fields, kw_only=True)
    init = cls.__init__

    def __init__(self: Any, **kwargs: Any) -> None:
        record("CompilationSettings", kwargs=kwargs)
        init(self, **kwargs)

    cls.__init__ = __init__
    cls.__module__ = "torch_tensorrt.dynamo._settings"
    return cls


FakeCompilationSettings = _settings_class()
SETTINGS_FIELDS = frozenset(f.name for f in dataclasses.fields(FakeCompilationSettings))


@dataclasses.dataclass
class FakeInput:
    min_shape: Any = None
    opt_shape: Any = None
    max_shape: Any = None
    dtype: Any = None
    name: str = ""

    def __post_init__(self) -> None:
        record("Input", kwargs=dataclasses.asdict(self))


FakeInput.__module__ = "torch_tensorrt._Input"
FakeInput.__qualname__ = FakeInput.__name__ = "Input"
checks.INPUT_TYPE = FakeInput
ENGINE_BUILDS_FAIL = False


class FakeTorchTensorRTModule(torch.nn.Module):
    """Stands for the engine module Torch-TensorRT puts in a compiled graph (the fake runs the
    graph's own code, so the module is never called)."""


FakeTorchTensorRTModule.__module__ = "torch_tensorrt.dynamo.runtime._TorchTensorRTModule"
FakeTorchTensorRTModule.__qualname__ = FakeTorchTensorRTModule.__name__ = "TorchTensorRTModule"


def _with_engine(module: torch.nn.Module) -> torch.nn.Module:
    if ENGINE_BUILDS_FAIL:
        module.add_module("_run_on_gpu_0", torch.nn.Module())
    else:
        module.add_module("_run_on_acc_0", FakeTorchTensorRTModule())
    return module


def make_fake_torch_tensorrt() -> types.ModuleType:
    trt = types.ModuleType("torch_tensorrt")
    trt.__version__ = "2.11.0"
    trt.calls = []  # (name, details) in call order
    dynamo = types.ModuleType("torch_tensorrt.dynamo")
    dynamo.CompilationSettings = FakeCompilationSettings

    def compile(
        exported_program: Any,
        inputs: Any = None,
        *,
        arg_inputs: Any = None,
        kwarg_inputs: Any = None,
        device: Any = None,
        **settings: Any,
    ) -> torch.fx.GraphModule:
        trt.calls.append(
            (
                "dynamo.compile",
                {
                    "exported": exported_program,
                    "arg_inputs": arg_inputs,
                    "kwarg_inputs": kwarg_inputs,
                    "device": device,
                    **settings,
                },
            )
        )
        record(
            "dynamo.compile",
            exported_program=exported_program,
            inputs=inputs,
            arg_inputs=arg_inputs,
            kwarg_inputs=kwarg_inputs,
            device=device,
            settings=settings,
        )
        checks.check_compile(inputs, arg_inputs, kwarg_inputs, settings, SETTINGS_FIELDS)
        module = _with_engine(exported_program.module())
        module._fake_exported_program = exported_program  # what save() writes
        return module

    def save(module: Any, file_path: str = "", **kwargs: Any) -> None:
        trt.calls.append(("save", {"module": module, "file_path": file_path, **kwargs}))
        record("save", exported_program=getattr(module, "_fake_exported_program", None), kwargs=kwargs)
        checks.check_save(module, file_path, **kwargs)
        torch.export.save(module._fake_exported_program, file_path, pickle_protocol=kwargs.get("pickle_protocol", 2))

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
    """The fake "torch_tensorrt" torch.compile backend: checks and records the options and returns the
    graph with an engine child, or (a failed build) the graph itself or the error, as 2.11 does."""
    trt = sys.modules["torch_tensorrt"]
    trt.calls.append(("torch.compile", {"options": dict(options or {}), "num_inputs": len(example_inputs)}))
    record("torch.compile", options=dict(options or {}))
    checks.check_compile_options(options or {}, SETTINGS_FIELDS)
    if ENGINE_BUILDS_FAIL:
        if (options or {}).get("pass_through_build_failures"):
            raise RuntimeError("fake Torch-TensorRT: the TensorRT engine build failed")
        return gm  # "Returning GraphModule forward instead."
    gm.add_module("_run_on_acc_0", FakeTorchTensorRTModule())
    return gm


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
