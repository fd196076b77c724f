"""`import aitune.torch.jit.enable`: JIT tuning for every module constructed afterwards (docs/reference/jit.md)."""

from aitune.torch.jit.patcher import enable as _enable

_enable()
