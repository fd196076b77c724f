"""Puts the process's libstdc++ into the dynamic linker's global scope before an AOTInductor
package is loaded.

Why: in a Python process libstdc++ is only a dependency of extension modules, which Python
opens with RTLD_LOCAL, so it is not in the global scope. A package's model library resolves its
interposable C++ runtime symbols (type_info vtables, locale caches, ...) through the global scope
first; where the library also carries some of them itself (seen on the GPU image, H200 with
g++ 13), it then mixes its own copies with libstdc++'s and crashes in its static constructors.
The same package loads fine from a C++ program (libstdc++ is global there), with
LD_PRELOAD=libstdc++.so.6, and after this promotion (tools/diagnostics/aoti_diag.py shows the three).
RTLD_NOLOAD promotes the copy already mapped; nothing new is loaded.
"""

from __future__ import annotations

import ctypes
import logging
import os

logger = logging.getLogger("aitune")
_promoted: str | None = None


def mapped_libstdcxx() -> str | None:
    """The path of the libstdc++ mapped in this process, if any (Linux)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if "/libstdc++.so" in path:
                    return path
    except OSError:
        return None
    return None


def promote_libstdcxx() -> str | None:
    """Promotes the mapped libstdc++ to RTLD_GLOBAL once per process; returns its path (None
    where there is none or the platform has no such flag)."""
    global _promoted
    if _promoted is not None:
        return _promoted
    path = mapped_libstdcxx()
    if path is None or not hasattr(os, "RTLD_NOLOAD"):
        return None
    try:
        ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL | os.RTLD_NOW)
    except OSError as e:  # not fatal: the load may still work, and the probe catches a crash
        logger.debug("aitune: could not promote %s to the global symbol scope: %s", path, e)
        return None
    _promoted = path
    return path
