"""ArtifactPath: a file or folder a backend produced and needs at run time (AITune's
`aitune.torch.checkpoint.artifact.ArtifactPath`, docs/guide.md "Coming from AITune").

A checkpoint copies exactly the values a backend's state marks as ArtifactPath; `root` is the
folder whose layout is kept (the build folder) and `relative_path` the artifact inside it."""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True, init=False)
class ArtifactPath:
    root: Path
    relative_path: Path

    def __init__(self, root: str | Path, relative_path: str | Path) -> None:
        relative = Path(relative_path)
        # A checkpoint stores the artifact under its relative path: an absolute one or one with
        # ".." would be written (and extracted) outside the artifact's folder.
        if relative.is_absolute():
            raise ValueError(f"ArtifactPath relative_path must be relative, got {str(relative)!r}")
        if ".." in relative.parts:
            raise ValueError(f"ArtifactPath relative_path must not escape its root, got {str(relative)!r}")
        object.__setattr__(self, "root", Path(root))
        object.__setattr__(self, "relative_path", relative)

    @property
    def path(self) -> Path:
        """Where the artifact is: root / relative_path."""
        return self.root / self.relative_path

    def __str__(self) -> str:
        return str(self.path)

    @classmethod
    def from_existing(cls, path: str | Path, root: str | Path) -> ArtifactPath:
        """The ArtifactPath of an existing file or folder `path` inside `root` (AITune passes
        `root` by keyword; positional works too)."""
        path, root = Path(path), Path(root)
        if not path.exists():
            raise FileNotFoundError(f"Artifact path does not exist: {path}")
        try:
            relative = path.resolve().relative_to(root.resolve())
        except ValueError:
            raise ValueError(f"Artifact path {path} is outside root {root}") from None
        return cls(root, relative)
