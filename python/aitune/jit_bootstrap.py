"""Target of the `aitune_enable_jit_tuning` entry point, which autowrapt loads at interpreter
start when `AUTOWRAPT_BOOTSTRAP=aitune_enable_jit_tuning` (SPEC §12).

It lives outside `aitune.torch` on purpose: loading the entry point must not import torch (that
would slow down every Python start). The entry point's name, `torch`, makes wrapt call
`enable_jit_tuning` as a post-import hook once torch is imported, before the model is built."""

from __future__ import annotations

from types import ModuleType


def enable_jit_tuning(_torch: ModuleType) -> None:
    import aitune.torch.jit.enable  # noqa: F401 - patches nn.Module construction
