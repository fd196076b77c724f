"""Making damaged and hostile checkpoints for the tests and the fuzzer (tests/fuzz): re-pack an
archive entry by entry through the native writer (so the ZIP structure, entry hashes and the
manifest's CRC are consistent: what is tested is the layer above the ZIP), optionally editing the
manifest or replacing members."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from aitune._native import _C


def read_archive(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(manifest, {entry path: bytes}) of a valid checkpoint."""
    reader = _C.ArchiveReader(str(path))
    manifest = json.loads(reader.manifest())
    members = {r["path"]: reader.read(r["path"], r) for r in manifest["files"]}
    return manifest, members


def write_archive(
    dst: Path, manifest: dict[str, Any] | str, members: dict[str, bytes], fix_records: bool = True
) -> Path:
    """Writes `members` and `manifest` (a dict, or raw manifest text) as an archive. With
    `fix_records`, the manifest's "files" list is replaced by the members' true records (sizes and
    hashes), as a careful editor would; without, it is written as given."""
    writer = _C.ArchiveWriter(str(dst))
    for name, data in members.items():
        writer.add_bytes(name, data)
    if isinstance(manifest, dict) and fix_records:
        manifest = dict(manifest, files=writer.files())
    writer.finish(manifest if isinstance(manifest, str) else json.dumps(manifest))
    return dst


def rewrite(
    src: Path,
    dst: Path,
    edit_manifest: Callable[[dict], Any] | None = None,
    replace: dict[str, bytes] | None = None,
    drop: tuple[str, ...] = (),
    extra: dict[str, bytes] | None = None,
) -> Path:
    """A copy of `src` with the manifest edited in place by `edit_manifest`, members replaced,
    dropped or added; records are recomputed for the members written."""
    manifest, members = read_archive(src)
    members = {k: v for k, v in members.items() if k not in drop}
    members.update(replace or {})
    members.update(extra or {})
    if edit_manifest is not None:
        edit_manifest(manifest)
    return write_archive(dst, manifest, members)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
