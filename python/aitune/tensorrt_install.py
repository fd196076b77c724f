"""Which TensorRT the Python environment has, and where (docs/guide.md, Checking the machine).

The version comes from `tensorrt.__version__`, not from package metadata: `pip install
tensorrt-cu13` (or -cu12) installs the module `tensorrt` from distributions named
tensorrt-cu13, tensorrt-cu13-bindings and tensorrt-cu13-libs, and none named "tensorrt", so
`importlib.metadata.version("tensorrt")` finds nothing there. TensorRT 10 ships libnvinfer.so.10,
TensorRT 11 libnvinfer.so.11; the loaded one is read from the process's memory map.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import types
from pathlib import Path

# Distributions that install the `tensorrt` module (the meta package and its parts, per CUDA major).
DISTRIBUTIONS = (
    "tensorrt",
    "tensorrt-cu13",
    "tensorrt-cu12",
    "tensorrt-cu13-bindings",
    "tensorrt-cu12-bindings",
    "tensorrt-cu13-libs",
    "tensorrt-cu12-libs",
)


def tensorrt_module(import_it: bool = True) -> types.ModuleType | None:
    """The `tensorrt` module: the one already imported, else imported now (when `import_it`);
    None when it is not installed or does not import (its native libraries missing)."""
    module = sys.modules.get("tensorrt")
    if module is not None or not import_it:
        return module
    try:
        if importlib.util.find_spec("tensorrt") is None:
            return None
        return importlib.import_module("tensorrt")
    except Exception:  # noqa: BLE001 - a broken install (OSError from a missing libnvinfer) is "not usable"
        return None


def tensorrt_version() -> str | None:
    """`tensorrt.__version__` ("11.4.0.106"), or None without a usable TensorRT."""
    module = tensorrt_module()
    version = getattr(module, "__version__", None) if module is not None else None
    return str(version) if version else None


def _loaded_libraries(stem: str) -> list[str]:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    found = {line.split()[-1] for line in maps.splitlines() if f"/{stem}.so" in line}
    return sorted(found)


def tensorrt_report() -> dict[str, object]:
    """What `python -m aitune doctor` says about TensorRT: version, major, module location, the
    distributions that installed it and the libnvinfer the process loaded."""
    module = tensorrt_module()
    distributions = {}
    for name in DISTRIBUTIONS:
        try:
            distributions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    version = tensorrt_version()
    return {
        "version": version,
        "major": int(version.split(".")[0]) if version and version.split(".")[0].isdigit() else None,
        "module": str(Path(module.__file__).parent)
        if module is not None and getattr(module, "__file__", None)
        else None,
        "distributions": distributions,
        "libnvinfer": _loaded_libraries("libnvinfer"),
    }
