"""`aitune.torch.jit.tune.deferred()` (docs/reference/jit.md TUNE_DEFERRED)."""

from __future__ import annotations

from aitune.torch.jit.config import JITMode
from aitune.torch.jit.config import config as jit_config
from aitune.torch.jit.state import runtime


def deferred() -> None:
    """Ends recording: every recording module is tuned at its next forward."""
    if jit_config.mode is not JITMode.TUNE_DEFERRED:
        mode = jit_config.mode.value if isinstance(jit_config.mode, JITMode) else jit_config.mode
        raise RuntimeError(f"tune.deferred() requires JITMode.TUNE_DEFERRED, but current mode is {mode}")
    runtime.deferred_requested = True
