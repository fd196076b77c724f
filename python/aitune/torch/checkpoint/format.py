"""The `.ait` on-disk format (docs/reference/checkpoint.md#layout-and-manifest): the typed manifest, the
opened and verified archive, the backend entry written for a built backend and the backend restored from
one. Used by ait.save/ait.load (which walk user objects) and by the results store; it knows nothing of
`ait.Module`, so neither does the store (docs/design.md#the-checkpoint).

Format versions (docs/reference/checkpoint.md#format-versions): format 1 names each backend by its Python
class path (`"class"`), format 2 by its registered stable name (`"name"`); both are read, and a class path
is only ever mapped to a name, never imported (backend/registry.py)."""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from aitune._native import _C
from aitune.exceptions import (
    CheckpointNotFoundError,
    UnsupportedCheckpointError,
)
from aitune.torch.backend import registry
from aitune.torch.backend.backend import ArtifactPath, Backend, ServingPlan, saved_plan
from aitune.torch.checkpoint.backend_state import load_backend_state, save_backend_state
from aitune.torch.checkpoint.corrupt import as_corrupt
from aitune.torch.checkpoint.paths import resolve_entry
from aitune.torch.checkpoint.storage import verify_sha512
from aitune.torch.config import config
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.utils.tensors import to_device

logger = logging.getLogger("aitune")

FORMAT = "aitune.checkpoint"
LATEST_FORMAT_VERSION = 2


def manifest_format_version() -> int:
    """The format new files are written in: 2 once the native manifest validator (which every reader,
    Python and C++, runs first) reads it, else 1. The one switch between the two writers."""
    return LATEST_FORMAT_VERSION if LATEST_FORMAT_VERSION in _C.MANIFEST_FORMAT_VERSIONS else 1


# -- typed manifest --------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FileRecord:
    """One archive entry as the manifest lists it (the native reader checks size and SHA-256)."""

    path: str
    size: int
    sha256: str

    @classmethod
    def from_native(cls, record: Any) -> FileRecord:
        return cls(record.path, record.size, record.sha256)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


@dataclasses.dataclass
class BackendEntry:
    """`modules[].graphs[].backend`: the backend that serves one graph. `name` is the stable registry
    name whatever the file's format; `class_path` is what a format-1 file stored (for messages)."""

    name: str
    config: dict[str, Any]
    requires: list[str]
    artifacts: dict[str, str]
    device: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    input_order: list[int] | None = None
    output_paths: list[str] | None = None
    precision_class: str | None = None
    tf32: dict[str, Any] | None = None
    is_jit: bool = False
    native: bool = False
    use_cuda_graphs: bool = False
    profiles: list | None = None
    own_state: bool = False  # AITune-contract backends: to_dict()/from_dict() state (backend_state.py)
    state: Any = None
    state_tensors: str | None = None
    class_path: str | None = None

    @classmethod
    def from_native(cls, native: Any) -> BackendEntry:
        """From the native reader's `_C.ManifestBackend`."""
        return cls(
            name=format1_name(native.name, native.class_path) if native.class_path else native.name,
            class_path=native.class_path,
            config=native.config,
            requires=list(native.requires),
            artifacts=dict(native.artifacts),
            device=native.device,
            extra=native.extra,
            input_order=native.input_order,
            output_paths=native.output_paths,
            precision_class=native.precision_class,
            tf32=native.tf32,
            is_jit=native.is_jit,
            native=native.native,
            use_cuda_graphs=native.use_cuda_graphs,
            profiles=None if native.profiles is None else [_profile(p) for p in native.profiles],
            own_state=native.own_state,
            state=native.state,
            state_tensors=native.state_tensors,
        )

    def to_json(self, version: int) -> dict[str, Any]:
        identity = {"name": self.name} if version >= 2 else {"class": registry.format1_class_for_name(self.name)}
        data: dict[str, Any] = {**identity, "config": self.config, "extra": self.extra}
        if self.own_state:
            data.update(
                {
                    "own_state": True,
                    "state": self.state,
                    "state_tensors": self.state_tensors,
                    "artifacts": self.artifacts,
                }
            )
        data.update(
            {
                # For runtimes without Python (C++ Runtime, CLI): which tensor input feeds each native
                # input, and the access path of each native output.
                "input_order": self.input_order,
                "output_paths": self.output_paths,
                # The class the outputs were judged by when tuning (e.g. tf32 for an fp32 model on CUDA),
                # and torch's TF32 switches then: every later check (aitune run --check) uses the same.
                "precision_class": self.precision_class,
                "tf32": self.tf32,
                "is_jit": self.is_jit,
                "native": self.native,
                "runtime": {"use_cuda_graphs": self.use_cuda_graphs},
                "profiles": self.profiles,
            }
        )
        if not self.own_state:
            data["artifacts"] = self.artifacts
        data.update({"requires": self.requires, "device": self.device})
        return data

    @property
    def shown(self) -> str:
        """How messages name the backend: the registered name (a format-1 file's class path as stored)."""
        return self.class_path or self.name

    def resolve(self) -> type[Backend]:
        """The registered class; nothing is imported because the file names it (docs/guide.md "Threat model")."""
        cls = registry.lookup(self.name)
        if cls is None:
            stored = f"{self.class_path} (backend name '{self.name}')" if self.class_path else self.name
            builtin = [n for n in registry.registered_names() if not n.startswith(registry.CUSTOM_PREFIX)]
            raise UnsupportedCheckpointError(
                f"Unknown backend type: {stored}. Registered backends: {', '.join(builtin)} and "
                f"{len(registry.registered_names()) - len(builtin)} custom. A custom backend registers itself when "
                "its module is imported: import the module that defines it before ait.load (aitune never imports "
                "a module that a checkpoint names)."
            )
        return cls


def format1_name(native_name: str, class_path: str) -> str:
    """The stable name of a format-1 entry's class path. The native reader maps it (its fixed table,
    else `custom:<path>`: cpp/core/checkpoint/backend_names.cc); a `custom:` name is refined here to
    the name of a class registered at that path under a short name (`@register_backend`), which
    only Python's registry knows."""
    if not native_name.startswith(registry.CUSTOM_PREFIX):
        return native_name
    for name in registry.registered_names():
        cls = registry.lookup(name)
        if cls is not None and registry.class_path(cls) == class_path:
            return name
    return native_name


def _profile(native: Any) -> list | None:
    """A saved range as the backends take it: `[min, max]` (a max dim None: unbounded), or None."""
    return [list(native.min), list(native.max)] if native.bounded else None


@dataclasses.dataclass
class GraphEntry:
    """`modules[].graphs[]`: one graph. `spec` is the native reader's graph (checkpoint/graphs.py
    builds the GraphSpec from it)."""

    name: str
    spec: Any
    backend: BackendEntry
    samples: list[str]

    @classmethod
    def from_native(cls, native: Any) -> GraphEntry:
        """From the native reader's `_C.ManifestGraph`."""
        return cls(native.name, native, BackendEntry.from_native(native.backend), list(native.samples))


@dataclasses.dataclass
class ModuleEntry:
    """`modules[]`: one tuned module and where it sits in the saved object."""

    name: str
    prefix: str
    class_path: str
    strict_mode: bool
    fallback_policy: str | None
    weights: dict[str, Any] | None
    forward_signature: list[dict[str, Any]]
    dynamic_shapes: Any
    graphs: list[GraphEntry]

    @classmethod
    def from_native(cls, native: Any) -> ModuleEntry:
        """From the native reader's `_C.ManifestModule`."""
        return cls(
            native.name,
            native.prefix,
            native.class_name,
            native.strict_mode,
            native.fallback_policy,
            native.weights,
            [{"name": p.name, "kind": p.kind, "has_default": p.has_default} for p in native.forward_signature],
            native.dynamic_shapes,
            [GraphEntry.from_native(g) for g in native.graphs],
        )


@dataclasses.dataclass
class RootEntry:
    """`root`: the saved object (a module or a pipeline) and its weights outside the tuned modules."""

    kind: str
    class_path: str
    weights: dict[str, Any] | None

    @classmethod
    def from_native(cls, native: Any) -> RootEntry:
        """From the native reader's `_C.ManifestRoot`."""
        return cls(native.kind, native.class_name, native.weights)


@dataclasses.dataclass
class Manifest:
    """The whole manifest, as the native reader (`_C.read_manifest`, the one parser of manifest.json,
    which runs the schema check first) typed it: only names and types the schema allows reach here."""

    format_version: int
    kind: str | None
    fingerprint: dict[str, str | None]  # a number a hand-edited file holds: its JSON text
    root: RootEntry
    modules: list[ModuleEntry]
    files: list[FileRecord]
    sha512: dict[str, str]
    created_at: str
    results_key: str | None  # a results-store file's key (results/store.py)

    @classmethod
    def from_native(cls, native: Any) -> Manifest:
        """From `_C.Manifest` (`ArchiveReader.read_manifest()` or `_C.read_manifest(text)`)."""
        return cls(
            native.format_version,
            native.kind,
            dict(native.fingerprint),
            RootEntry.from_native(native.root),
            [ModuleEntry.from_native(m) for m in native.modules],
            [FileRecord.from_native(f) for f in native.files],
            dict(native.sha512),
            native.created_at,
            native.results_key,
        )


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
        self.manifest = Manifest.from_native(self.reader.read_manifest())
        # As the reader's calls take them: {"path", "size", "sha256"}.
        self.records = {f.path: f.to_json() for f in self.manifest.files}
        self.reader.check_listed(list(self.records.values()))
        self.verify_full = verify == "full"
        self.sha512 = self.manifest.sha512  # saved with sha_type="512"

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


def config_of(cls: type[Backend], entry: BackendEntry) -> Any:
    """The backend's config (None for AITune-contract backends, which configure themselves)."""
    return None if entry.own_state else cls.config_class.from_dict(entry.config)


def restore_backend(
    cls: type[Backend],
    entry: BackendEntry,
    module: torch.nn.Module,
    graph: GraphSpec,
    device: torch.device,
    artifacts_root: Path | None,
    retune: bool,
    module_name: str,
    config: Any = None,
    path: Path | None = None,
) -> Backend:
    """An active backend for one graph (with the precision class it was validated with)."""
    if config is None:
        config = config_of(cls, entry)
    backend = _restore_backend(cls, config, entry, module, graph, device, artifacts_root, retune, module_name, path)
    if isinstance(entry.precision_class, str):
        backend.validated_precision = {
            "precision_class": entry.precision_class,
            "tf32": entry.tf32 if isinstance(entry.tf32, dict) else None,
        }
    return backend


def _restore_backend(
    cls: type[Backend],
    config: Any,
    entry: BackendEntry,
    module: torch.nn.Module,
    graph: GraphSpec,
    device: torch.device,
    artifacts_root: Path | None,
    retune: bool,
    module_name: str,
    path: Path | None,
) -> Backend:
    """AOT artifacts load from the extracted files; JIT and eager backends (and graphs re-tuned
    after an incompatibility) build again from the module and the stored samples."""
    where = (f"Checkpoint {path}: " if path else "") + f"module '{module_name}' graph '{graph.name}'"
    if entry.own_state and not retune:
        # A backend written to AITune's contract restores itself (checkpoint/backend_state.py); what
        # its from_dict makes of the checkpoint's files fails as the file's error, like a restore.
        with as_corrupt(path or Path("?")):
            state = load_backend_state(
                {"state": entry.state, "state_tensors": entry.state_tensors}, artifacts_root, f"{where} backend state"
            )
            backend = cls.from_dict(module, state)
            backend.deploy(device)
        return backend
    artifacts = {}
    if artifacts_root is not None:
        for key, entry_path in entry.artifacts.items():
            # The schema allows only listed entries of the graph's folder; the resolver also checks
            # the extracted file system (links) before anything is opened.
            artifacts[key] = resolve_entry(artifacts_root, entry_path, f"{where} backend artifact '{key}'")
    if artifacts and not retune and cls.restores_from_artifacts:
        with as_corrupt(path or Path("?")):
            backend = cls.restore(config, artifacts, graph, device)
        if entry.profiles is not None and backend.input_profile() is None:
            # An artifact loaded on its own does not know its shape range: keep the saved one, so
            # the input check holds and a checkpoint saved again still carries it.
            backend.saved_input_profile = [tuple(p) if p is not None else None for p in entry.profiles]
        return backend
    if not graph.samples:
        raise RuntimeError(
            f"Cannot rebuild {cls.__name__} for module '{module_name}' graph '{graph.name}': the checkpoint holds no "
            "samples (saved with include_samples=False)"
        )
    if any(p.device.type == "meta" for p in module.parameters()):
        raise RuntimeError(
            f"Cannot rebuild {cls.__name__} for module '{module_name}' graph '{graph.name}': it needs the module's "
            "weights, and neither the given module nor the checkpoint has them (save with include_weights=True)"
        )
    # The stored samples come back on the CPU; a rebuild (torch.compile's warm-up, CUDA-graph
    # capture) must see them where the weights are.
    graph.samples = [Sample(*to_device((s.args, s.kwargs), device), s.batch_size) for s in graph.samples]
    backend = cls() if entry.own_state else cls(config)  # AITune's backends configure themselves
    backend.build(module, graph, graph.samples, device, _rebuild_dir(module_name, graph.name, cls, config))
    return backend


def _rebuild_dir(module_name: str, graph_name: str, cls: type, config: Any) -> Path:
    """Where a JIT or eager backend is rebuilt: under the cache, or a temporary folder when the
    cache is read-only (the folder holds only the build's config and log)."""
    key = config.key() if config is not None else "own_state"
    folder = Path(config_cache_dir()) / module_name / graph_name / "loaded" / f"{cls.__name__}_{key}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
        return folder
    except OSError as e:
        fallback = Path(tempfile.mkdtemp(prefix="aitune-load-"))
        logger.info("The aitune cache folder %s is not writable (%s); rebuilding in %s", folder, e.strerror, fallback)
        return fallback


def config_cache_dir() -> Path:
    return Path(config.cache_dir)


# -- writing ---------------------------------------------------------------------------------------
def backend_entry(backend: Backend, writer: Any, prefix: str) -> BackendEntry:
    """The manifest entry of a built backend; its artifacts are written under `<prefix>/backend/`."""
    cls = type(backend)
    precision = _precision(backend)
    common = {
        "name": registry.name_of(cls),
        "precision_class": precision["precision_class"],
        "tf32": precision["tf32"],
        "is_jit": bool(backend.is_jit),
        "profiles": backend.input_profile(),
        "requires": backend.requirements(),
        "device": str(backend.device) if backend.device is not None else None,
    }
    if cls._contract.own_state:
        # A backend written to AITune's contract: its to_dict() state, restored by its from_dict().
        stored = save_backend_state(f"{cls.__name__}.to_dict()", backend.to_dict(), writer, f"{prefix}/backend")
        return BackendEntry(
            config={},
            own_state=True,
            state=stored["state"],
            state_tensors=stored["state_tensors"],
            artifacts=stored["artifacts"],
            **common,
        )
    data = backend.to_dict()
    data.pop("class", None)
    artifacts = {}
    for key, value in list(data.items()):
        if isinstance(value, ArtifactPath):
            name = f"{prefix}/backend/{Path(value.relative_path).as_posix()}"
            writer.add_file(name, str(value.path))
            artifacts[key] = name
            del data[key]
    plan = saved_plan(backend) if artifacts and not backend.is_jit else None
    return BackendEntry(
        config=data.pop("config"),
        extra=data,
        artifacts=artifacts,
        input_order=list(plan.input_order) if plan else None,
        output_paths=_output_paths(plan) if plan else None,
        native=bool(artifacts) and not backend.is_jit,
        use_cuda_graphs=backend.cuda_graphs.requested,
        **common,
    )


def _precision(backend: Backend) -> dict[str, Any]:
    validated = backend.validated_precision or {}
    return {
        "precision_class": validated.get("precision_class") or backend.precision_class,
        "tf32": validated.get("tf32"),
    }


def _output_paths(plan: ServingPlan) -> list[str]:
    """The access path of each native output, e.g. `output[1]["logits"]` (the C++ runtime names outputs by them)."""
    outputs = plan.outputs
    if outputs is None or not outputs.known:
        raise RuntimeError("the output structure of a native serving plan is not known: the graph has not run yet")
    return list(outputs.access or [])
