"""Where checkpoints go (SPEC §10.1)."""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass
class LocalTorchStorage:
    """Checkpoints are written to `base_folder / path` with the suffix `.ait` (an absolute path
    is used as is). `compress_checkpoint` and `remove_checkpoint_after_tune` are accepted for
    source compatibility and ignored: entries are stored uncompressed so they can be mapped."""

    base_folder: str | Path = "checkpoints"
    compress_checkpoint: bool = True
    overwrite_checkpoint_on_tune: bool = True
    remove_checkpoint_after_tune: bool = False
    sha_type: str = "256"

    def __post_init__(self) -> None:
        if self.sha_type != "256":
            raise ValueError(f"LocalTorchStorage.sha_type must be '256', got {self.sha_type!r}")

    def resolve(self, path: str | Path) -> Path:
        path = Path(path)
        if not path.is_absolute():
            path = Path(self.base_folder) / path
        return path.with_suffix(".ait")
