"""The `.ait` on-disk format (docs/reference/checkpoint.md#layout-and-manifest): its name and
versions, the opened and verified archive, and how a graph's backend entry names its backend. Used
by ait.save/ait.load (which walk user objects) and by the results store; it knows nothing of
`ait.Module`, so neither does the store (docs/design.md#the-checkpoint).

The manifest is read by the one native reader (`_C.ArchiveReader.read_manifest`, which runs the
schema check first) and used as its typed objects (`_C.Manifest`, `_C.ManifestModule`,
`_C.ManifestGraph`, `_C.ManifestBackend`, ...): Python declares none of its fields. The entry
written for a backend is in entry_writer.py, the backend restored from one in restore.py.

Format versions (docs/reference/checkpoint.md#format-versions): format 1 names each backend by its Python
class path (`"class"`), format 2 by its registered stable name (`"name"`); both are read, and a class path
is only ever mapped to a name, never imported (backend/registry.py)."""

from __future__ import annotations

from pathlib import Path

from aitune._native import _C
from aitune.exceptions import CheckpointNotFoundError, UnsupportedCheckpointError
from aitune.torch.backend import registry
from aitune.torch.backend.backend import Backend
from aitune.torch.checkpoint.paths import resolve_entry
from aitune.torch.checkpoint.storage import verify_sha512
from aitune.torch.config import config

FORMAT = _C.MANIFEST_FORMAT  # manifest.json's "format" (cpp/core/checkpoint/manifest_schema.h)


def manifest_format_version() -> int:
    """The format new files are written in: the newest the native reader (which every reader,
    Python and C++, runs first) reads. The one switch between the two writers."""
    return max(_C.MANIFEST_FORMAT_VERSIONS)


# -- the backend an entry names --------------------------------------------------------------------
def backend_name(entry: _C.ManifestBackend) -> str:
    """The entry's stable registry name whatever the file's format. The native reader maps a
    format-1 class path (its fixed table, else `custom:<path>`: cpp/core/checkpoint/backend_names.cc);
    a `custom:` name is refined here to the name of a class registered at that path under a short
    name (`@register_backend`), which only Python's registry knows."""
    if not entry.class_path or not entry.name.startswith(registry.CUSTOM_PREFIX):
        return entry.name
    for name in registry.registered_names():
        cls = registry.lookup(name)
        if cls is not None and registry.class_path(cls) == entry.class_path:
            return name
    return entry.name


def shown_name(entry: _C.ManifestBackend) -> str:
    """How messages name the backend: the registered name (a format-1 file's class path as stored)."""
    return entry.class_path or backend_name(entry)


def resolve_backend(entry: _C.ManifestBackend) -> type[Backend]:
    """The registered class; nothing is imported because the file names it (docs/guide.md "Threat model")."""
    name = backend_name(entry)
    cls = registry.lookup(name)
    if cls is None:
        stored = f"{entry.class_path} (backend name '{name}')" if entry.class_path else name
        builtin = [n for n in registry.registered_names() if not n.startswith(registry.CUSTOM_PREFIX)]
        raise UnsupportedCheckpointError(
            f"Unknown backend type: {stored}. Registered backends: {', '.join(builtin)} and "
            f"{len(registry.registered_names()) - len(builtin)} custom. A custom backend registers itself when "
            "its module is imported: import the module that defines it before ait.load (aitune never imports "
            "a module that a checkpoint names)."
        )
    return cls


# -- reading ---------------------------------------------------------------------------------------
class OpenedCheckpoint:
    """A verified archive: manifest, file records, and read helpers."""

    def __init__(self, path: Path, verify: str) -> None:
        if not path.exists():
            raise CheckpointNotFoundError(f"Checkpoint file not found: {path}")
        self.path = path
        # Refuses non-regular files, a damaged ZIP structure and AITune's pickled state_dict.pt
        # (cpp/core/checkpoint/zip_reader.cc, "The one refusal").
        self.reader = _C.ArchiveReader(str(path))
        # The one reader of manifest.json, the C++ runtime's too: the schema check (format, version,
        # types, nesting, names, every referenced file listed under its own module's and graph's
        # folder), then the typed manifest.
        self.manifest: _C.Manifest = self.reader.read_manifest()
        # As the reader's calls take them: {"path", "size", "sha256"}.
        self.records = {f.path: {"path": f.path, "size": f.size, "sha256": f.sha256} for f in self.manifest.files}
        self.reader.check_listed(list(self.records.values()))
        self.verify_full = verify == "full"
        self.sha512 = dict(self.manifest.sha512)  # saved with sha_type="512"

    def read(self, name: str) -> bytes:
        data = self.reader.read(name, self.records[name])
        if name in self.sha512:
            verify_sha512({name: self.sha512[name]}, lambda _: data)
        return data

    def extract_all(self) -> Path:
        root = Path(config.cache_dir) / "checkpoints"
        folder = Path(self.reader.extract_all(list(self.records.values()), str(root), self.verify_full))
        verify_sha512(self.sha512, lambda name: resolve_entry(folder, name, "sha512").read_bytes(), set(self.records))
        return folder
