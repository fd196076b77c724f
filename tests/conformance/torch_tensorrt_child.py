"""Runs in the sandbox of torch_tensorrt_sandbox.py, where the real Torch-TensorRT 2.11 imports
without a GPU, and prints one JSON line:

    settings          the fields of CompilationSettings with their defaults (normalised), and the
                      named parameters of dynamo.compile
    probe             the outcome of each call of torch_tensorrt_probes.PROBES
    replay <folder>   the outcome of each call the fake recorded there (fake_torch_tensorrt_journal)
    runtime           the engine module classes of torch_tensorrt.dynamo.runtime, and what the
                      torch.compile backend returns when its engine build fails, with
                      pass_through_build_failures False and True

dynamo.compile runs until its arguments are checked and its CompilationSettings are built: the
next step (lowering the program for TensorRT) is where a GPU is needed, and it is replaced by a
marker exception. save runs completely (it needs no GPU with retrace=False).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import pickle
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import torch

# The two GPU questions the import chain asks, answered as a machine with one GPU would.
torch.cuda.current_device = lambda: 0
torch.cuda.get_device_capability = lambda device=None: (9, 0)

import torch_tensorrt  # noqa: E402
from torch_tensorrt.dynamo import _compiler  # noqa: E402
from torch_tensorrt.dynamo.lowering import get_decompositions, post_lowering  # noqa: E402
from torch_tensorrt.dynamo.utils import parse_dynamo_kwargs  # noqa: E402

from settings_normal_form import normal_form  # noqa: E402
from torch_tensorrt_probes import CUDA, run_probes  # noqa: E402


class ArgumentsAccepted(Exception):
    """Raised where dynamo.compile would start lowering: every check before it passed."""


def _accepted(*args: Any, **kwargs: Any) -> None:
    raise ArgumentsAccepted


_compiler.pre_export_lowering = _accepted
COMPILE_PARAMETERS = [
    p.name
    for p in inspect.signature(torch_tensorrt.dynamo.compile).parameters.values()
    if p.kind is not inspect.Parameter.VAR_KEYWORD
]
FIELDS = [f.name for f in dataclasses.fields(torch_tensorrt.dynamo.CompilationSettings)]


def _program() -> torch.export.ExportedProgram:
    return torch.export.export(torch.nn.Linear(3, 3), (torch.randn(2, 3),))


def _compiled_module(program: torch.export.ExportedProgram) -> torch.fx.GraphModule:
    """What dynamo.compile makes of `program` before the TensorRT conversion (which needs a GPU):
    the decomposed, lowered GraphModule, without engines. save() takes it as it would take the
    compiled module."""
    decomposed = program.run_decompositions(get_decompositions(False, False))
    return post_lowering(decomposed.module(), torch_tensorrt.dynamo.CompilationSettings())


class RealSide:
    """The probes' view of the real library."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ep = _program()
        self.Input = torch_tensorrt.Input

    def save(self, module: Any = None, file_path: str | None = None, **kwargs: Any) -> None:
        module = _compiled_module(self.ep) if module is None else module
        torch_tensorrt.save(module, str(self.folder / "probe.ep") if file_path is None else file_path, **kwargs)

    def compile(self, **kwargs: Any) -> None:
        kwargs.setdefault("device", CUDA)
        try:
            torch_tensorrt.dynamo.compile(self.ep, **kwargs)
        except ArgumentsAccepted:
            return

    def settings(self, **kwargs: Any) -> None:
        torch_tensorrt.dynamo.CompilationSettings(**kwargs)

    def options(self, options: dict) -> None:
        parse_dynamo_kwargs({"options": dict(options)})


# -- replaying the fake's journal ---------------------------------------------------------------
def _cuda(device: Any) -> Any:
    """The unit tests run the backends on the CPU; the real ones run on CUDA only."""
    return CUDA if isinstance(device, torch.device) and device.type == "cpu" else device


def _decode(value: Any, folder: Path) -> Any:
    if isinstance(value, tuple) and value and isinstance(value[0], str):
        tag = value[0]
        if tag == "ExportedProgram":
            return torch.export.load(str(folder / value[1]))
        if tag == "Input":
            return torch_tensorrt.Input(**{k: v for k, v in value[1].items() if v is not None})
        if tag == "Tensor":
            return torch.zeros(value[1], dtype=value[2])
        if tag == "op":
            target: Any = torch.ops
            for part in value[1].split("."):
                target = getattr(target, part)
            return target
        if tag == "tuple":
            return tuple(_decode(v, folder) for v in value[1])
        if tag == "set":
            return {_decode(v, folder) for v in value[1]}
        if tag == "CompilationSettings":
            return torch_tensorrt.dynamo.CompilationSettings(**{k: _decode(v, folder) for k, v in value[1].items()})
        if tag == "unknown":
            raise TypeError(f"the journal holds a value the replay cannot rebuild: {value[1]} {value[2]}")
    if isinstance(value, list):
        return [_decode(v, folder) for v in value]
    if isinstance(value, dict):
        return {k: _decode(v, folder) for k, v in value.items()}
    return value


def _leaves(value: Any) -> list:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    return [value]


def _replay_compile(entry: dict, folder: Path) -> None:
    settings = _decode(entry["settings"], folder)
    swallowed = sorted(set(settings) - set(COMPILE_PARAMETERS))
    if swallowed:  # dynamo.compile takes them in **kwargs and ignores them
        raise TypeError(f"settings that are no parameter of dynamo.compile (ignored there): {swallowed}")
    arg_inputs, kwarg_inputs = _decode(entry["arg_inputs"], folder), _decode(entry["kwarg_inputs"], folder)
    others = [
        leaf
        for leaf in _leaves([arg_inputs, kwarg_inputs])
        if leaf is not None and not isinstance(leaf, torch_tensorrt.Input)
    ]
    if others:  # 2.11 refuses a str and makes a 0-d tensor input of a float or bool
        raise TypeError(f"non-tensor values reach dynamo.compile as inputs: {others!r}")
    try:
        torch_tensorrt.dynamo.compile(
            _decode(entry["exported_program"], folder),
            _decode(entry["inputs"], folder),
            arg_inputs=arg_inputs,
            kwarg_inputs=kwarg_inputs,
            device=_cuda(_decode(entry["device"], folder)),
            **settings,
        )
    except ArgumentsAccepted:
        return


def _replay_save(entry: dict, folder: Path, scratch: Path) -> None:
    kwargs = _decode(entry["kwargs"], folder)
    program = _decode(entry["exported_program"], folder)
    target = scratch / "saved.ep"
    torch_tensorrt.save(_compiled_module(program), str(target), **kwargs)
    torch_tensorrt.load(str(target)).module()  # what aitune's loading does


def _replay_options(entry: dict, folder: Path) -> None:
    options = {k: _cuda(v) for k, v in _decode(entry["options"], folder).items()}
    unknown = sorted(set(options) - set(FIELDS))
    if unknown:  # parse_dynamo_kwargs drops them silently
        raise TypeError(f"options that are no CompilationSettings field (dropped silently): {unknown}")
    parse_dynamo_kwargs({"options": options})


def replay(folder: Path) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for path in sorted(folder.glob("*.pkl")):
            entry = pickle.loads(path.read_bytes())
            call = entry["call"]
            try:
                if call == "CompilationSettings":
                    torch_tensorrt.dynamo.CompilationSettings(**_decode(entry["kwargs"], folder))
                elif call == "Input":
                    torch_tensorrt.Input(**{k: v for k, v in _decode(entry["kwargs"], folder).items() if v is not None})
                elif call == "dynamo.compile":
                    _replay_compile(entry, folder)
                elif call == "save":
                    _replay_save(entry, folder, Path(scratch))
                elif call == "torch.compile":
                    _replay_options(entry, folder)
                else:
                    raise ValueError(f"unknown call {call!r} in the journal")
                results.append({"call": call, "test": entry["test"], "ok": True})
            except Exception as e:  # noqa: BLE001 - every refusal is reported, with where it came from
                frames = traceback.extract_tb(e.__traceback__)
                where = next(
                    (
                        f"{Path(f.filename).name}:{f.lineno}"
                        for f in reversed(frames)
                        if f"{os.sep}torch_tensorrt{os.sep}" in f.filename
                    ),
                    "a rule of this tier",
                )
                results.append(
                    {
                        "call": call,
                        "test": entry["test"],
                        "ok": False,
                        "error": f"{type(e).__name__}: {e}".splitlines()[0][:500],
                        "where": where,
                    }
                )
    return results


class EngineBuildFailed(RuntimeError):
    """Raised where the torch.compile backend converts its graph to TensorRT engines."""


def _failing_conversion(*args: Any, **kwargs: Any) -> None:
    raise EngineBuildFailed("the TensorRT engine build failed")


class _Graph(torch.nn.Module):
    """What Dynamo hands a backend: a graph returning a tuple."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.relu(self.linear(x)),)


def runtime() -> dict:
    """The names aitune counts engines by, and the fallback it must detect: the real backend, run on
    a traced graph with fake inputs (as Dynamo calls it) up to its engine conversion, which fails."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch_tensorrt.dynamo import runtime as trt_runtime
    from torch_tensorrt.dynamo.backend import backends

    classes = {
        name: getattr(trt_runtime, name).__module__ for name in ("TorchTensorRTModule", "PythonTorchTensorRTModule")
    }
    backends.compile_module = _failing_conversion
    outcomes = {}
    for flag in (False, True):
        gm = torch.fx.symbolic_trace(_Graph())
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        inputs = [mode.from_tensor(torch.randn(2, 3))]
        settings = torch_tensorrt.dynamo.CompilationSettings(pass_through_build_failures=flag)
        try:
            result = backends._pretraced_backend(gm, inputs, settings)
        except EngineBuildFailed:
            outcomes[str(flag)] = "raised the build error"
            continue
        modules = list(result.modules()) if isinstance(result, torch.nn.Module) else []
        engines = sum(type(m).__name__ in classes for m in modules)
        kind = "GraphModule" if isinstance(result, torch.fx.GraphModule) else type(result).__name__
        outcomes[str(flag)] = f"returned a {kind} with {engines} engine module(s)"
    return {"classes": classes, "build_failure": outcomes}


def main() -> None:
    mode = sys.argv[1]
    if mode == "settings":
        defaults = torch_tensorrt.dynamo.CompilationSettings()
        out: Any = {
            "fields": FIELDS,
            "compile_parameters": COMPILE_PARAMETERS,
            "defaults": {name: normal_form(getattr(defaults, name)) for name in FIELDS},
        }
    elif mode == "probe":
        with tempfile.TemporaryDirectory() as folder:
            out = run_probes(RealSide(Path(folder)))
    elif mode == "replay":
        out = replay(Path(sys.argv[2]))
    elif mode == "runtime":
        out = runtime()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
