"""`ait.profile`: where the time of one representative call goes, per tuned (AOT-managed) module
and per untuned submodule, measured with the PyTorch Profiler (docs/guide.md, "Profiling a
call")."""

from aitune.torch.performance.profile import PerformanceProfile, profile

__all__ = ["PerformanceProfile", "profile"]
