"""Target of the `aitune_enable_jit_tuning` entry point, which autowrapt loads at interpreter
start when `AUTOWRAPT_BOOTSTRAP=aitune_enable_jit_tuning` (docs/reference/jit.md).

It lives outside `aitune.torch` on purpose: loading the entry point must not import torch (that
would slow down every Python start). The entry point's name, `torch`, makes wrapt call
`enable_jit_tuning` as a post-import hook once torch is imported, before the model is built."""

from __future__ import annotations

import sys
from types import ModuleType

# Helper processes that inherit the environment variable but run no user model (Inductor's
# compile workers, Triton's tools): JIT tuning there would only add start-up time and exit logs.
_TOOL_PACKAGES = ("torch.", "triton.", "aitune.")


def _is_tool_process() -> bool:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and (spec.name or "").startswith(_TOOL_PACKAGES)


def enable_jit_tuning(_torch: ModuleType) -> None:
    if _is_tool_process():
        return
    import aitune.torch.jit.enable  # noqa: F401 - patches nn.Module construction
