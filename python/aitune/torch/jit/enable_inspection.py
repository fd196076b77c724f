"""`import aitune.torch.jit.enable_inspection`: JIT inspection (docs/reference/jit.md): `mode=INSPECT`,
`max_depth_level=7`; call counts, CUDA-synchronised timings and argument/output types of every
patched module. `save_report(path, model_name)` writes the HTML report; otherwise
`jit_inspect_<timestamp>.html` is written at exit."""

from aitune.torch.jit.config import JITMode
from aitune.torch.jit.config import config as _config
from aitune.torch.jit.inspection import save_report
from aitune.torch.jit.patcher import enable as _enable

_config.mode = JITMode.INSPECT
_config.max_depth_level = 7
_enable()

__all__ = ["save_report"]
