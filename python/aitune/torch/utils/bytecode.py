"""Whether Python has bytecode (.pyc) for torch's compiler modules, or can write it.

Dynamo and Inductor import most of their modules at the first compile, so inside ait.tune and a JIT
rebuild. Where Python has no bytecode for them and cannot write any (PYTHONDONTWRITEBYTECODE, as
many container images set it, or a read-only install without .pyc files), every process compiles
them from source again: on the GPU benchmark image, about 2,300 modules and several seconds of each
tuning (benchmarks/RESULTS.md, 2026-12-07 sixth session). docs/reference/configuration.md,
"Bytecode", gives the fix. Only file metadata is read: nothing is imported."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from pathlib import Path

# Modules Dynamo and Inductor import only when they first compile, relative to torch's folder.
PROBES: tuple[str, ...] = (
    "_dynamo/variables/misc.py",
    "_dynamo/guards.py",
    "_inductor/compile_fx.py",
    "_inductor/freezing.py",
)


@dataclasses.dataclass(frozen=True)
class BytecodeState:
    missing: tuple[str, ...]  # probed sources without a bytecode file where Python looks for one
    writes: bool  # whether this process would write the missing ones

    @property
    def recompiles_every_process(self) -> bool:
        return bool(self.missing) and not self.writes

    def hint(self) -> str | None:
        if not self.recompiles_every_process:
            return None
        why = (
            "PYTHONDONTWRITEBYTECODE is set"
            if sys.dont_write_bytecode
            else "its bytecode folder is not writable by this user"
        )
        return (
            f"Python has no bytecode for torch's compiler modules and cannot write it ({why}): every process "
            "compiles them from source again, several seconds of each tuning and each rebuild of a JIT result. "
            "Point PYTHONPYCACHEPREFIX at a writable folder (once filled, e.g. by `python -m compileall` over "
            "site-packages, every process reads it), or unset PYTHONDONTWRITEBYTECODE "
            "(docs/reference/configuration.md, Bytecode)."
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "missing": list(self.missing),
            "writes": self.writes,
            "pycache_prefix": sys.pycache_prefix,
            "dont_write_bytecode": sys.dont_write_bytecode,
            "hint": self.hint(),
        }


def _writable(path: Path) -> bool:
    """Whether Python could create `path` and write into it: the nearest existing path at or above
    it must be a writable folder (Python creates the folders below it)."""
    for folder in (path, *path.parents):
        if folder.exists():
            return folder.is_dir() and os.access(folder, os.W_OK)
    return False


def bytecode_state(package_dir: Path | None = None, probes: tuple[str, ...] = PROBES) -> BytecodeState:
    """The state for `probes` under `package_dir` (default: the installed torch's folder, found
    without importing more of torch). Bytecode paths honour sys.pycache_prefix
    (PYTHONPYCACHEPREFIX), as the import system does."""
    if package_dir is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            return BytecodeState((), True)
        package_dir = Path(spec.origin).parent
    missing = []
    writes = not sys.dont_write_bytecode
    for relative in probes:
        source = package_dir / relative
        if not source.is_file():
            continue
        cached = Path(importlib.util.cache_from_source(str(source)))
        if not cached.is_file():
            missing.append(relative)
            writes = writes and _writable(cached.parent)
    return BytecodeState(tuple(missing), writes)
