"""Stand-ins for TensorRT's native libraries, so the real pybind11 bindings import on a machine
without TensorRT, CUDA or a GPU.

The bindings module (`tensorrt_bindings/tensorrt.so`) links libnvinfer, libnvonnxparser and
libnvinfer_plugin of its major version, but its import only registers classes, methods and enums:
it calls none of them. Each stand-in defines every TensorRT symbol the module needs as a
function returning 0, under the real soname, so the loader is satisfied. Nothing that creates a
Builder, Runtime or engine can work in such a process (the factories return null); the process
exists to read the real API surface and to run Torch-TensorRT's pure-Python code.

Needs a C compiler (`cc`) and `nm` (binutils): both come with the C++ toolchain `./run test`
installs.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from real_wheels import _locked, cache_dir

# Symbols the bindings resolve from libc, libstdc++, libm, libgcc, the dynamic loader and libpython.
_PROVIDED = re.compile(r"^(_?Py|_ITM_|__gmon_start__|__cxa_|__gxx_|__pthread|pthread_|dl[a-z]+$)")


class StubsUnavailable(RuntimeError):
    """No C compiler or nm here: the tier skips with this reason."""


def _tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise StubsUnavailable(
        f"none of {list(names)} is on PATH; the real TensorRT bindings cannot be imported here "
        "without stand-ins for libnvinfer (install a C compiler and binutils)"
    )


def tensorrt_symbols(bindings_so: Path) -> list[str]:
    """The undefined, unversioned symbols of the bindings module that TensorRT's libraries provide."""
    nm = _tool("nm")
    out = subprocess.run(
        [nm, "-D", "--undefined-only", str(bindings_so)], capture_output=True, text=True, check=True
    ).stdout
    symbols = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 2 or parts[0] != "U" or "@" in parts[1]:
            continue  # weak symbols, and versioned ones (GLIBC_, CXXABI_, GCC_ ...)
        if not _PROVIDED.match(parts[1]):
            symbols.append(parts[1])
    if not symbols:
        raise RuntimeError(f"found no TensorRT symbols in {bindings_so}: is it a TensorRT bindings module?")
    return sorted(symbols)


def _needed(bindings_so: Path) -> list[str]:
    """The module's DT_NEEDED entries that belong to TensorRT (libnvinfer*.so.N, libnvonnxparser.so.N)."""
    data = bindings_so.read_bytes()
    return sorted({m.decode() for m in re.findall(rb"lib(?:nvinfer|nvonnxparser)[a-z_]*\.so\.\d+", data)})


def stub_dir(bindings_so: Path) -> Path:
    """A folder (for LD_LIBRARY_PATH) holding a stand-in for each TensorRT library the module needs."""
    symbols = tensorrt_symbols(bindings_so)
    sonames = _needed(bindings_so)
    digest = hashlib.sha256(("\n".join(symbols + sonames)).encode()).hexdigest()[:16]
    target = cache_dir() / "native_stubs" / digest
    with _locked(f"stubs-{digest}"):
        if (target / ".complete").is_file():
            return target
        cc = _tool("cc", "gcc", "clang")
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / "stub.c"
            source.write_text("".join(f"void *{name}(void) {{ return 0; }}\n" for name in symbols))
            for soname in sonames:
                subprocess.run(
                    [cc, "-shared", "-fPIC", "-o", str(target / soname), f"-Wl,-soname,{soname}", str(source)],
                    check=True,
                    capture_output=True,
                    text=True,
                )
        (target / ".complete").touch()
    return target


def child_env(python_path: list[Path], stubs: Path) -> dict[str, str]:
    """The environment of a child process that imports the real bindings: the unpacked wheels on
    PYTHONPATH, the stand-ins on LD_LIBRARY_PATH, and no CUDA device (there is none to find)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in python_path)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(stubs), env.get("LD_LIBRARY_PATH", "")) if p)
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env
