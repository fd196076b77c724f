"""Where checkpoints go, and AITune's storage of a plain state dict (docs/reference/checkpoint.md#save-and-load;
docs/guide.md, "Coming from AITune")."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from aitune._native import _C
from aitune.exceptions import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    InvalidValueError,
)
from aitune.torch.checkpoint.backend_state import load_backend_state, save_backend_state
from aitune.torch.checkpoint.corrupt import as_corrupt
from aitune.torch.checkpoint.paths import resolve_entry
from aitune.torch.config import config

SHA_TYPES = ("256", "512")
W = TypeVar("W", "_C.ArchiveWriter", "Sha512Recorder")

STATE_FORMAT = "aitune.state_dict"  # LocalTorchStorage.save: a state dict on its own, not a tuned module


@dataclasses.dataclass
class LocalTorchStorage:
    """Checkpoints are written to `base_folder / path` with the suffix `.ait` (an absolute path
    is used as is). `compress_checkpoint` and `remove_checkpoint_after_tune` are accepted for
    source compatibility and ignored: entries are stored uncompressed so they can be mapped, and
    one file is written, no folder beside it.

    `sha_type`: every entry is hashed with SHA-256 in the archive's manifest; "512" adds a SHA-512
    of every entry, which loading verifies too."""

    base_folder: str | Path = "checkpoints"
    compress_checkpoint: bool = True
    overwrite_checkpoint_on_tune: bool = True
    remove_checkpoint_after_tune: bool = False
    sha_type: str = "256"

    def __post_init__(self) -> None:
        if self.sha_type not in SHA_TYPES:
            raise InvalidValueError(f"LocalTorchStorage.sha_type must be '256' or '512', got {self.sha_type!r}")

    def resolve(self, path: str | Path) -> Path:
        path = Path(path)
        if not path.is_absolute():
            path = Path(self.base_folder) / path
        return path.with_suffix(".ait")

    def save(self, path: str | Path, state_dict: dict[str, Any]) -> Path:
        """Writes `state_dict` (tensors, numbers, strings, containers, dataclasses, paths,
        ArtifactPath files and folders, devices, dtypes) to one `.ait` file; nothing is pickled."""
        target = self.resolve(path)
        if target.exists() and not self.overwrite_checkpoint_on_tune:
            raise FileExistsError(f"Folder {target} already exists")
        target.parent.mkdir(parents=True, exist_ok=True)
        writer = Sha512Recorder(_C.ArchiveWriter(str(target)), enabled=self.sha_type == "512")
        with abandoned_on_error(writer):
            stored = save_backend_state("state_dict", state_dict, writer, "state")
            manifest = {
                "format": STATE_FORMAT,
                "format_version": 1,
                "sha_type": self.sha_type,
                "state": stored.skeleton,
                "state_tensors": stored.tensors_entry,
                "artifacts": stored.entries,
                "sha512": writer.digests if self.sha_type == "512" else None,
                "files": writer.files(),
            }
            writer.finish(json.dumps(manifest, indent=1))
        return target

    def load(self, path: str | Path) -> dict[str, Any]:
        """The state dict saved by `save`, every file verified; ArtifactPaths point into the
        extraction folder under `config.cache_dir`."""
        target = self.resolve(path)
        if not target.exists():
            raise CheckpointNotFoundError(f"Checkpoint file not found: {target}")
        reader = _C.ArchiveReader(str(target))
        # The C++ schema of state dicts (cpp/core/checkpoint/state_schema.h), as ait.load runs the
        # checkpoint schema: format, version, every file listed once, every path the state names
        # (tensors, artifact folders and relative paths) a listed entry under state/.
        manifest = _C.read_state_manifest(reader.manifest())
        with as_corrupt(target):
            records = list(manifest["files"])
            reader.check_listed(records)
            extracted = None
            if records:
                extracted = Path(reader.extract_all(records, str(Path(config.cache_dir) / "checkpoints"), True))
                verify_sha512(
                    manifest.get("sha512"),
                    lambda name: resolve_entry(extracted, name, "sha512").read_bytes(),
                    {r["path"] for r in records},
                )
            return load_backend_state(
                manifest["state"], manifest.get("state_tensors"), extracted, f"Checkpoint {target}: state dict"
            )


@contextlib.contextmanager
def abandoned_on_error(writer: W) -> Iterator[W]:
    """An archive writer whose temporary file is removed at once when anything -- an error,
    Ctrl-C -- stops the write half-way (not when the traceback holding the writer is freed):
    nothing half-written stays beside the target."""
    try:
        yield writer
    except BaseException:
        writer.abandon()
        raise


class Sha512Recorder:
    """An ArchiveWriter that also records the SHA-512 of every entry it adds (when enabled)."""

    def __init__(self, writer: _C.ArchiveWriter, enabled: bool) -> None:
        self.writer = writer
        self.enabled = enabled
        self.digests: dict[str, str] = {}

    def add_file(self, name: str, source_path: str) -> None:
        if self.enabled:
            digest = hashlib.sha512()
            with open(source_path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            self.digests[name] = digest.hexdigest()
        self.writer.add_file(name, source_path)

    def add_bytes(self, name: str, data: bytes) -> None:
        if self.enabled:
            self.digests[name] = hashlib.sha512(memoryview(data)).hexdigest()
        self.writer.add_bytes(name, data)

    def files(self) -> list:
        return self.writer.files()

    def finish(self, manifest: str) -> None:
        self.writer.finish(manifest)

    def abandon(self) -> None:
        self.writer.abandon()


def verify_sha512(digests: dict[str, str] | None, read: Callable[[str], bytes], listed: set[str] | None = None) -> None:
    """Raises CorruptCheckpointError naming every entry whose SHA-512 differs from the manifest's.
    `listed`: the archive's entries; a digest for any other name (a path outside it) is refused."""
    if not digests:
        return

    if not isinstance(digests, dict) or (listed is not None and not set(digests) <= listed):
        raise CorruptCheckpointError("The manifest's sha512 digests name entries the archive does not list")
    bad = [name for name, expected in sorted(digests.items()) if hashlib.sha512(read(name)).hexdigest() != expected]
    if bad:
        raise CorruptCheckpointError(f"Failed to verify SHA hashes for files: {bad}")
