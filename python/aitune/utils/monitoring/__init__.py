"""AITune's `aitune.utils.monitoring` annotations (docs/guide.md, "Coming from AITune"): `annotate`
and `annotate_with_nvtx` mark a function or a block as a named range in NVTX (Nsight Systems) and
in the PyTorch Profiler's trace. AITune's hardware-metrics collection is not provided."""

from aitune.utils.monitoring.annotation import annotate
from aitune.utils.monitoring.nvtx_annotation import annotate_with_nvtx

__all__ = ["annotate", "annotate_with_nvtx"]
