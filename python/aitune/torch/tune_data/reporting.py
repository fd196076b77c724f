"""AITune 0.6 import path, re-exporting aitune's objects (tests/compat/aitune_paths.py; docs/guide.md)."""

from aitune.torch.tune_data.recorder import snapshot_tuning_data

__all__ = ["snapshot_tuning_data"]
