"""Loads the native extension ``aitune._C`` after checking it matches the installed torch.

The extension links libtorch's C++ ABI, which changes between torch releases; loading it under
another release fails with unreadable symbol errors, or worse, corrupts memory. The check turns
that into an ImportError that names both versions (docs/design.md#layers).
"""

import os

import torch

try:
    from aitune import _C
except ImportError as e:  # pragma: no cover - depends on how the package was installed
    raise ImportError(
        "aitune's native extension aitune._C is missing or failed to load "
        f"({e}). Reinstall aitune with `pip install --no-build-isolation .` against torch {torch.__version__}."
    ) from e


def _release(version: str) -> str:
    return version.split("+")[0]


if _release(_C.torch_version) != _release(torch.__version__):
    raise ImportError(
        f"aitune's native libraries were built for torch {_C.torch_version}, but torch {torch.__version__} "
        "is installed; rebuild aitune against this torch (`pip install --no-build-isolation .`)."
    )

# A crash inside a native library (a model package, a driver) shows only Python frames through
# faulthandler; AITUNE_CRASH_REPORT=1 adds the native ones first (docs/guide.md#checking-the-machine).
if os.environ.get("AITUNE_CRASH_REPORT") == "1":
    _C.install_crash_report()

__all__ = ["_C"]
