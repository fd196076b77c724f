"""The checkpoint entry of a backend that keeps its own state, as AITune's backends do:
`to_dict()` returns the state and classmethod `from_dict(module, state_dict)` restores it
(docs/guide.md, "Coming from AITune").

The state is stored as a JSON skeleton, never pickled [Δ: AITune pickles it with torch.save]:
tensors go to one safetensors entry, every ArtifactPath (file or folder) is copied into the
archive, and on load each comes back as an ArtifactPath under the extracted checkpoint folder.
Besides what checkpoint/structure.py holds (tensors, numbers, strings, lists, tuples, dicts,
dataclasses, named tuples), a state may hold paths, torch.device and torch.dtype values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import torch
from safetensors.torch import load_file as load_safetensors_file
from safetensors.torch import save as save_safetensors

from aitune.torch.checkpoint.artifact import ArtifactPath
from aitune.torch.checkpoint.paths import resolve_entry
from aitune.torch.checkpoint.structure import JSON, NotRepresentable, decode, encode

_TENSORS = "state.safetensors"


class EntryWriter(Protocol):
    """What adds archive entries: `_C.ArchiveWriter`, or storage.Sha512Recorder around one."""

    def add_file(self, name: str, source_path: str) -> None: ...

    def add_bytes(self, name: str, data: bytes) -> None: ...


class _Encoder:
    def __init__(self, writer: EntryWriter, prefix: str) -> None:
        self.writer = writer
        self.prefix = prefix
        self.tensors: dict[str, torch.Tensor] = {}
        self.roots: dict[str, str] = {}  # artifact root -> archive folder
        self.entries: list[str] = []

    def artifact(self, artifact: ArtifactPath) -> dict[str, Any]:
        # Artifacts with different roots may share relative paths: one archive folder per root.
        folder = self.roots.setdefault(str(Path(artifact.root).resolve()), f"{self.prefix}/{len(self.roots)}")
        source = artifact.path
        if not source.exists():
            raise FileNotFoundError(f"Backend artifact not found: {source}")
        files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
        for file in files:
            name = f"{folder}/{file.relative_to(artifact.root).as_posix()}"
            if name not in self.entries:  # a file may also be inside an artifact folder
                self.writer.add_file(name, str(file))
                self.entries.append(name)
        return {"artifact": {"folder": folder, "relative_path": artifact.relative_path.as_posix()}}

    def encode(self, value: Any, where: str) -> JSON:
        if isinstance(value, ArtifactPath):
            return self.artifact(value)
        if isinstance(value, Path):
            return {"path": str(value)}
        if isinstance(value, torch.device):
            return {"device": str(value)}
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).removeprefix("torch.")}
        if type(value) in (list, tuple):
            return {type(value).__name__: [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if type(value) is dict:
            items = []
            for key, item in value.items():
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise NotRepresentable(f"{where}: dict key {key!r} is neither str nor int")
                items.append([key, self.encode(item, f"{where}[{key!r}]")])
            return {"dict": items}
        try:
            return encode(value, self.tensors)
        except NotRepresentable as e:
            raise NotRepresentable(f"{where}: {e}") from None


class StoredState(NamedTuple):
    """A state as written: what the manifest stores (a backend entry, entry_writer.py, or a
    LocalTorchStorage state dict, storage.py)."""

    skeleton: JSON
    tensors_entry: str | None  # the entry holding its tensors; None without tensors
    entries: dict[str, str]  # every entry written, by name


def save_backend_state(owner: str, state: dict[str, Any], writer: EntryWriter, prefix: str) -> StoredState:
    """Writes the state's tensors and artifacts under `<prefix>/`. `owner` names the state in
    errors, e.g. "TorchScriptBackend.to_dict()"."""
    encoder = _Encoder(writer, prefix)
    try:
        skeleton = encoder.encode(state, owner)
    except NotRepresentable as e:
        raise ValueError(
            f"Cannot save {owner}: {e}. A saved state may hold tensors, numbers, strings, lists, "
            "tuples, dicts, dataclasses, paths, ArtifactPath, torch.device and torch.dtype values "
            "(aitune stores no pickle)"
        ) from None
    tensors_entry = None
    if encoder.tensors:
        tensors_entry = f"{prefix}/{_TENSORS}"
        writer.add_bytes(tensors_entry, save_safetensors(encoder.tensors))
        encoder.entries.append(tensors_entry)
    json.dumps(skeleton)  # fails here, naming nothing half-written, if a node is not JSON
    return StoredState(skeleton, tensors_entry, {name: name for name in encoder.entries})


def load_backend_state(
    skeleton: JSON, tensors_entry: str | None, extracted: Path | None, what: str = "backend state"
) -> dict[str, Any]:
    """The state dict to pass to `from_dict` (`skeleton` as stored, `tensors_entry`: the entry
    holding its tensors), with ArtifactPaths under the extracted folder. Every
    path the state names (its tensors' entry, each artifact's folder and relative path) goes
    through checkpoint/paths.py: one that leads outside the extraction folder, or names nothing
    extracted, is a CorruptCheckpointError naming `what` and the field."""
    tensors: dict[str, torch.Tensor] = {}
    if tensors_entry:
        tensors = load_safetensors_file(str(resolve_entry(extracted, tensors_entry, f"{what}: state_tensors")))

    def walk(node: JSON) -> Any:
        if "artifact" in node:
            spec = node["artifact"]
            where = f"{what}: artifact"
            resolve_entry(extracted, spec["folder"], where, spec["relative_path"])  # inside, and present
            return ArtifactPath(resolve_entry(extracted, spec["folder"], where), spec["relative_path"])
        if "path" in node:  # a plain path value: handed to from_dict as is, never opened by aitune
            return Path(node["path"])
        if "device" in node:
            return torch.device(node["device"])
        if "dtype" in node:
            dtype = getattr(torch, str(node["dtype"]), None)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"unknown dtype {node['dtype']!r} in a backend state")
            return dtype
        if "list" in node:
            return [walk(v) for v in node["list"]]
        if "tuple" in node:
            return tuple(walk(v) for v in node["tuple"])
        if "dict" in node:
            return {k: walk(v) for k, v in node["dict"]}
        return decode(node, tensors)

    return walk(skeleton)
