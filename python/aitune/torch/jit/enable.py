"""`import aitune.torch.jit.enable`: JIT tuning for every module constructed afterwards (SPEC §12)."""

from aitune.torch.jit.patcher import enable as _enable

_enable()
