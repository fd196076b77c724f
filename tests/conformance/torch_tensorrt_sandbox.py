"""A place where the real Torch-TensorRT 2.11 imports on a machine without a GPU, and a way to run
code there.

The sandbox is a folder for PYTHONPATH built once in the wheel cache (real_wheels.py):

* `torch_tensorrt/`: the package's Python files from the real wheel, without its compiled
  TorchScript frontend and runtime (`_C*.so`, `lib/`), which need CUDA and libnvinfer;
  `torch_tensorrt` then runs with its dynamo frontend only, which is what aitune uses;
* `tensorrt/__init__.py`: what the `tensorrt-cu13` package itself ships (two lines that re-export
  `tensorrt_bindings`); the bindings are the real 10.15 wheel (the release 2.11 requires), loaded
  against stand-ins for TensorRT's native libraries (native_stubs.py);
* `psutil/`, `dllist/`: stand-ins for two small packages the import chain needs and this
  environment lacks (CPU memory figures, the list of loaded libraries); nothing checked uses them.

The child process (torch_tensorrt_child.py) also answers the two GPU questions the import chain
asks (`torch.cuda.current_device`, `torch.cuda.get_device_capability`) as a machine with one GPU
would. Everything that validates arguments is Torch-TensorRT's own code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from extract_tensorrt_surface import bindings_dir, bindings_module
from native_stubs import child_env, stub_dir
from real_wheels import (
    TORCH_TENSORRT,
    TORCH_TENSORRT_TENSORRT_VERSION,
    TORCH_TENSORRT_VERSION,
    _locked,
    cache_dir,
    unpacked,
)

HERE = Path(__file__).resolve().parent
CHILD = HERE / "torch_tensorrt_child.py"
_COMPILED = ("lib", "bin", "include")  # top-level folders of the wheel with native code and headers

TENSORRT_SHIM = (
    "from tensorrt_bindings import *  # noqa: F401,F403\nfrom tensorrt_bindings import __version__  # noqa: F401\n"
)
PSUTIL_STANDIN = '''"""Stand-in: Torch-TensorRT reads memory figures with it only while compiling engines."""


class _Memory:
    rss = 0
    available = 0


class Process:
    def memory_info(self):
        return _Memory()


def virtual_memory():
    return _Memory()
'''
DLLIST_STANDIN = (
    '"""Stand-in: no library is loaded that Torch-TensorRT looks for."""\n\n\ndef dllist():\n    return []\n'
)


def _ignore_compiled(root: Path) -> Any:
    def ignore(folder: str, names: list[str]) -> set[str]:
        if Path(folder) == root:
            return {n for n in names if n in _COMPILED or (n.startswith("_C.") and n.endswith(".so"))}
        return set()

    return ignore


def sandbox_site() -> Path:
    wheel_root = unpacked(TORCH_TENSORRT, TORCH_TENSORRT_VERSION)
    site = cache_dir() / "torch_tensorrt_sandbox" / wheel_root.name
    with _locked(f"sandbox-{wheel_root.name}"):
        if not (site / ".complete").is_file():
            shutil.rmtree(site, ignore_errors=True)
            source = wheel_root / "torch_tensorrt"
            shutil.copytree(source, site / "torch_tensorrt", ignore=_ignore_compiled(source))
            for package, text in (("tensorrt", TENSORRT_SHIM), ("psutil", PSUTIL_STANDIN), ("dllist", DLLIST_STANDIN)):
                (site / package).mkdir(parents=True)
                (site / package / "__init__.py").write_text(text)
            (site / ".complete").touch()
    return site


def run_child(*args: str, timeout: int = 600) -> Any:
    """Runs torch_tensorrt_child.py with `args` in the sandbox; returns the JSON it prints."""
    version = TORCH_TENSORRT_TENSORRT_VERSION
    env = child_env([sandbox_site(), bindings_dir(version), HERE], stub_dir(bindings_module(version)))
    env.pop("AITUNE_TORCH_TENSORRT_JOURNAL", None)
    env["PYTHONWARNINGS"] = "ignore"
    result = subprocess.run(
        [sys.executable, str(CHILD), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=os.environ.get("TMPDIR", "/tmp"),
    )
    if result.returncode != 0:
        raise RuntimeError(f"the real Torch-TensorRT child failed ({' '.join(args)}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])
