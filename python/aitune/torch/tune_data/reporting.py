"""AITune's import path for `snapshot_tuning_data` (docs/guide.md, "Coming from AITune")."""

from aitune.torch.tune_data.recorder import snapshot_tuning_data

__all__ = ["snapshot_tuning_data"]
