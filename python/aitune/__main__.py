"""``python -m aitune doctor [--json]``: the environment as aitune sees it.

The C++ CLI (`aitune doctor`) reports what native code can load; this Python twin adds the
Python packages that backends import and which built-in backends are available here.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import sys


def _package_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


_PACKAGES = {
    "torch": "torch",
    "torch_tensorrt": "torch-tensorrt",
    "onnx": "onnx",
    "onnxscript": "onnxscript",
    "onnxruntime": "onnxruntime",
    "onnxruntime-gpu": "onnxruntime-gpu",
    "modelopt": "nvidia-modelopt",
    "torchao": "torchao",
    "autowrapt": "autowrapt",
}


def _python_report() -> dict:
    import torch

    from aitune.tensorrt_install import tensorrt_report

    report: dict = {"python": sys.version.split()[0], "packages": {}}
    for label, dist in _PACKAGES.items():
        report["packages"][label] = _package_version(dist)
    # TensorRT's module version, not a distribution's: `pip install tensorrt-cu13` has no
    # distribution named "tensorrt" (aitune.tensorrt_install).
    report["tensorrt"] = tensorrt_report()
    report["packages"]["tensorrt"] = report["tensorrt"]["version"]
    report["torch_cuda_available"] = torch.cuda.is_available()
    try:
        import onnxruntime

        report["onnxruntime_providers"] = onnxruntime.get_available_providers()
    except ImportError:
        report["onnxruntime_providers"] = []
    from aitune.torch import backend as backends

    available = {}
    for name in backends.__all__:
        cls = getattr(backends, name)
        if isinstance(cls, type) and issubclass(cls, backends.Backend) and cls is not backends.Backend:
            ok, reason = cls().is_available()
            available[name] = "available" if ok else f"unavailable: {reason}"
    report["backends"] = available
    from aitune.torch.utils.bytecode import bytecode_state

    report["bytecode"] = bytecode_state().to_dict()
    return report


def doctor(as_json: bool) -> int:
    from aitune._native import _C

    native_json, native_text = _C.environment_report()
    native = json.loads(native_json)
    python = _python_report()
    if as_json:
        print(json.dumps({"native": native, "python": python}, indent=2))
        return 0
    print(native_text, end="")
    print(f"Python {python['python']}")
    for label, version in python["packages"].items():
        print(f"  {label}: {version or 'not installed'}")
    trt = python["tensorrt"]
    if trt["version"]:
        dists = ", ".join(f"{name} {version}" for name, version in trt["distributions"].items()) or "none found"
        print(
            f"  TensorRT {trt['major']}.x ({trt['version']}) from {trt['module']} (distributions: {dists}); "
            f"libnvinfer: {', '.join(trt['libnvinfer']) or 'not loaded'}"
        )
    if python["onnxruntime_providers"]:
        print(f"  onnxruntime providers: {', '.join(python['onnxruntime_providers'])}")
    print("Backends:")
    for name, state in python["backends"].items():
        print(f"  {name}: {state}")
    bytecode = python["bytecode"]
    print(f"Bytecode of torch's compiler modules: {bytecode['hint'] or 'present, or written by the first process'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aitune")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("doctor", help="show what aitune can use on this machine")
    d.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return doctor(args.json)
    return 2  # pragma: no cover - argparse rejects other commands


if __name__ == "__main__":
    sys.exit(main())
