from __future__ import annotations

import dataclasses

from aitune.torch.backend.backend import BackendConfig


@dataclasses.dataclass
class PluginTraceBackendConfig(BackendConfig):
    """check_trace: passed to torch.jit.trace."""

    check_trace: bool = False
