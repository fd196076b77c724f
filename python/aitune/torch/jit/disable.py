"""`import aitune.torch.jit.disable`: stops JIT patching and unpatches modules not yet tuned (docs/reference/jit.md).

A module is executed once, so importing this again has no effect: call
`aitune.torch.jit.patcher.disable()` to disable a second time."""

from aitune.torch.jit.patcher import disable as _disable

_disable()
