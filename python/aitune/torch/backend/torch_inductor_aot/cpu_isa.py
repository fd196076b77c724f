"""Whether this machine can run the CPU code of an AOTInductor package (docs/guide.md "Threat
model"): Inductor compiles a CPU package for the vector instructions of the machine that built it
and records them in the package's metadata (`AOTI_CPU_ISA`, e.g. "AVX512 AVX512_VNNI";
`AOTI_MACHINE`, e.g. "x86_64"). torch's loader does not compare them with the machine that loads
it: an AVX-512 package on an AVX2 CPU dies of SIGILL at its first vector instruction. This check
reads the metadata (no native code runs) and refuses such a package with
IncompatibleCheckpointError, naming what it needs and what this CPU lacks; the load check
(load_check.py) still catches what metadata cannot tell.

A package whose metadata cannot be read is left to the load check: this is a compatibility check,
not a validation of the file."""

from __future__ import annotations

import json
import platform
import zipfile
from pathlib import Path

from aitune.exceptions import IncompatibleCheckpointError

# Inductor's ISA names (module torch._inductor.cpu_vec_isa, upper-cased in the metadata) -> the
# /proc/cpuinfo flags its compiler flags need (-mavx512f ... -> avx512f ...). Names not listed
# (NEON, ASIMD, VSX, ZVECTOR) are not judged.
_CPU_FLAGS: dict[str, tuple[str, ...]] = {
    "AVX2": ("avx2", "fma", "f16c"),
    "AVX512": ("avx512f", "avx512dq", "avx512vl", "avx512bw", "fma"),
    "AVX512_VNNI": ("avx512_vnni",),
    "AMX_TILE": ("amx_tile", "amx_bf16", "amx_int8"),
}
_MAX_METADATA_BYTES = 64 * 1024


def package_metadata(path: Path) -> dict[str, str] | None:
    """The first `*_metadata.json` of an AOTInductor package (a zip), or None where there is none
    or it cannot be read."""
    try:
        with zipfile.ZipFile(path) as package:
            for info in package.infolist():
                if info.filename.endswith("_metadata.json") and "/aotinductor/" in info.filename:
                    if info.file_size > _MAX_METADATA_BYTES:
                        return None
                    data = json.loads(package.read(info))
                    if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()):
                        return data
                    return None
    except (OSError, ValueError, zipfile.BadZipFile, RuntimeError, NotImplementedError):
        return None
    return None


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """This CPU's feature flags (Linux), or None where they cannot be read."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("flags") and ":" in line:
                return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def check_cpu_package(path: Path, flags: set[str] | None = None, machine: str | None = None) -> None:
    """Raises IncompatibleCheckpointError when the package `path` was compiled for a CPU device
    and another machine type or instructions this CPU lacks."""
    metadata = package_metadata(path)
    if not metadata or metadata.get("AOTI_DEVICE_KEY", "cpu") != "cpu":
        return  # a CUDA package's host code is not vectorised for the building CPU
    machine = platform.machine() if machine is None else machine
    built_on = metadata.get("AOTI_MACHINE")
    if built_on and machine and built_on != machine:
        raise IncompatibleCheckpointError(
            f"AOTInductor package {path}: compiled for {built_on} CPUs, this machine is {machine}; "
            "tune and save again on this kind of machine"
        )
    isa = metadata.get("AOTI_CPU_ISA", "")
    needed = [flag for name in isa.split() for flag in _CPU_FLAGS.get(name, ())]
    flags = cpu_flags() if flags is None else flags
    if not needed or flags is None:
        return
    missing = sorted(set(needed) - flags)
    if missing:
        has = next((name for name in ("AVX512", "AVX2") if set(_CPU_FLAGS[name]) <= flags), "neither AVX2 nor AVX-512")
        raise IncompatibleCheckpointError(
            f"AOTInductor package {path}: compiled for CPU instructions {isa} (AOTI_CPU_ISA), and this CPU "
            f"lacks {', '.join(missing)} (it has {has}); running it would end in SIGILL. Tune and save "
            "again on this CPU, or load the checkpoint on a CPU with those instructions"
        )
