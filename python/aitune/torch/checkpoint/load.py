"""ait.load: verify a `.ait` file, then put its tuned modules back into an object (SPEC §10).

Everything is read and checked (format, listing, hashes, fingerprint) before the object is
touched, so a bad file leaves the object as it was. Nothing is unpickled."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import torch

from aitune._native import _C
from aitune.exceptions import (
    CheckpointNotFoundError,
    IncompatibleCheckpointError,
    UnsupportedCheckpointError,
)
from aitune.torch.backend.backend import Backend
from aitune.torch.checkpoint.fingerprint import current_fingerprint, mismatches
from aitune.torch.checkpoint.graphs import graph_from_json, sample_from_entries
from aitune.torch.checkpoint.save import FORMAT, FORMAT_VERSION
from aitune.torch.checkpoint.storage import LocalTorchStorage, verify_sha512
from aitune.torch.checkpoint.weights import unpack_state_dict
from aitune.torch.config import config
from aitune.torch.module.signature import KIND_NAMES

logger = logging.getLogger("aitune")
_KIND_NUMBERS = {name: number for number, name in KIND_NAMES.items()}


def _all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


def backend_class(name: str) -> type[Backend]:
    """The Backend subclass with this qualified name, at any depth (SPEC §4.1 [Δ])."""
    import aitune.torch.backend  # noqa: F401 - registers the built-in backends

    for cls in _all_subclasses(Backend):
        if f"{cls.__module__}.{cls.__qualname__}" == name:
            return cls
    module_name = name.rsplit(".", 1)[0]
    try:
        __import__(module_name)
    except ImportError:
        pass
    for cls in _all_subclasses(Backend):
        if f"{cls.__module__}.{cls.__qualname__}" == name:
            return cls
    raise UnsupportedCheckpointError(f"Unknown backend type: {name}")


class OpenedCheckpoint:
    """A verified archive: manifest, file records, and read helpers."""

    def __init__(self, path: Path, verify: str) -> None:
        if not path.exists():
            raise CheckpointNotFoundError(f"Checkpoint file not found: {path}")
        self.path = path
        self.reader = _C.ArchiveReader(str(path))
        names = set(self.reader.entry_names())
        if "state_dict.pt" in names or any(n.endswith("/state_dict.pt") for n in names):
            raise UnsupportedCheckpointError(
                f"{path} is a checkpoint of the reference implementation: it stores a pickled state that would "
                "execute code when loaded, so aitune refuses it. Re-tune the model and save it with aitune."
            )
        self.manifest = json.loads(self.reader.manifest())
        if self.manifest.get("format") != FORMAT:
            raise UnsupportedCheckpointError(f"{path} is not an aitune checkpoint (format {self.manifest.get('format')!r})")
        version = self.manifest.get("format_version")
        if not isinstance(version, int) or version != FORMAT_VERSION:
            raise UnsupportedCheckpointError(
                f"Unsupported checkpoint format_version {version} (this aitune reads {FORMAT_VERSION})"
            )
        self.records = {f["path"]: f for f in self.manifest["files"]}
        self.reader.check_listed(list(self.records.values()))
        self.verify_full = verify == "full"
        self.sha512: dict[str, str] = self.manifest.get("sha512") or {}  # saved with sha_type="512"

    def read(self, name: str) -> bytes:
        data = self.reader.read(name, self.records[name])
        if name in self.sha512:
            verify_sha512({name: self.sha512[name]}, lambda _: data)
        return data

    def extract_all(self) -> Path:
        root = Path(config.cache_dir) / "checkpoints"
        folder = Path(self.reader.extract_all(list(self.records.values()), str(root), self.verify_full))
        verify_sha512(self.sha512, lambda name: (folder / name).read_bytes())
        return folder


def _resolve_target(obj: Any, prefix: str) -> tuple[Any, str, Any]:
    """(parent, attribute, current value) for a module prefix inside `obj`."""
    parent = obj
    parts = prefix.split(".")
    for part in parts[:-1]:
        parent = getattr(parent, part)
    return parent, parts[-1], getattr(parent, parts[-1], None)


def load(module: Any, path: str | Path, storage: LocalTorchStorage | None = None, device_map: dict | None = None,
         disable_external_logging: bool = True, *, on_incompatible: str = "raise", verify: str | None = None) -> Any:
    from aitune.torch.module.wrapper import Module

    start = time.perf_counter()
    if on_incompatible not in ("raise", "retune"):
        raise ValueError(f"on_incompatible must be 'raise' or 'retune', got {on_incompatible!r}")
    verify = verify or __import__("os").environ.get("AITUNE_VERIFY_CHECKPOINT", "fast")
    if verify not in ("fast", "full"):
        raise ValueError(f"verify must be 'fast' or 'full', got {verify!r}")
    storage = storage or LocalTorchStorage()
    # As ait.save wrote it (base folder, ".ait"), unless the path names an existing file as is.
    target = Path(path) if Path(path).is_absolute() and Path(path).is_file() else storage.resolve(path)
    ckpt = OpenedCheckpoint(target, verify)
    manifest = ckpt.manifest
    entries = manifest["modules"]
    device_map = dict(device_map or {})
    unknown = sorted(set(device_map) - {e["name"] for e in entries})
    if unknown:
        raise ValueError(f"Some modules in the device_map were not found: {unknown}")

    # 1. Locate every module in the object before changing anything.
    located = []
    missing = {}
    for entry in entries:
        if entry["prefix"] == "":
            current = module
            holder = None
        else:
            try:
                holder = _resolve_target(module, entry["prefix"])
                current = holder[2]
            except AttributeError:
                current = None
        if current is None:
            missing[entry["name"]] = entry["prefix"]
            continue
        plain = current.__wrapped__ if isinstance(current, Module) else current
        located.append((entry, holder, plain))
    if missing:
        raise ValueError(f"Some modules in the state_dict were not found in the pipeline: {missing}")

    # 2. Check the environment against what each graph requires.
    saved_fp = manifest.get("fingerprint", {})
    problems = []
    retune: set[tuple[str, str]] = set()
    for entry, _, _ in located:
        for g in entry["graphs"]:
            device = torch.device(device_map.get(entry["name"]) or g["backend"].get("device") or "cpu")
            current_fp = current_fingerprint(device)
            found = mismatches(saved_fp, current_fp, g["backend"]["requires"],
                               f"{g['backend']['class'].rsplit('.', 1)[-1]} of module '{entry['name']}' graph "
                               f"'{g['name']}'")
            if found and on_incompatible == "retune":
                retune.add((entry["name"], g["name"]))
            problems += found
    if problems and on_incompatible == "raise":
        raise IncompatibleCheckpointError(problems)

    # 3. Read weights, samples and artifacts (hash-verified) before touching the object.
    artifacts_root = ckpt.extract_all() if any(g["backend"]["artifacts"] for e, _, _ in located
                                               for g in e["graphs"]) else None
    prepared = []
    for entry, holder, plain in located:
        weights = None
        if entry["weights"]:
            w = entry["weights"]
            weights = unpack_state_dict(ckpt.read(w["entry"]), w["aliases"], w["extra_state"])
        params = [(p["name"], _KIND_NUMBERS[p["kind"]], p["has_default"]) for p in entry["forward_signature"]]
        graphs = []
        for g in entry["graphs"]:
            graph = graph_from_json(g, params, None)
            for sample_prefix in g["samples"]:
                sample, reference = sample_from_entries(ckpt.read(f"{sample_prefix}.safetensors"),
                                                        json.loads(ckpt.read(f"{sample_prefix}.json")))
                graph.samples.append(sample)
                if reference is not None:
                    graph.reference_outputs.append(reference)
            graphs.append((graph, g["backend"]))
        prepared.append((entry, holder, plain, weights, graphs))
    root_weights = None
    if manifest["root"].get("weights"):
        w = manifest["root"]["weights"]
        root_weights = unpack_state_dict(ckpt.read(w["entry"]), w["aliases"], w["extra_state"])

    # 4. Build the backends (module weights are loaded first: JIT and eager backends serve them).
    result = module
    for entry, holder, plain, weights, graphs in prepared:
        if weights is not None:
            plain.load_state_dict(weights, strict=False)
        served = []
        for graph, b in graphs:
            device = torch.device(device_map.get(entry["name"]) or b.get("device") or "cpu")
            cls = backend_class(b["class"])
            backend = restore_backend(cls, b, plain, graph, device, artifacts_root,
                                      retune=(entry["name"], graph.name) in retune, module_name=entry["name"])
            served.append((graph, backend))
        wrapped = Module(plain, entry["name"], fallback_policy=entry["fallback_policy"])
        wrapped._restore_tuned([g for g, _ in served], served, entry["strict_mode"])
        if holder is None:
            result = wrapped
        else:
            parent, attr, _ = holder
            setattr(parent, attr, wrapped)
    if root_weights is not None and isinstance(module, torch.nn.Module):
        module.load_state_dict(root_weights, strict=False)
    logger.info("✅ Checkpoint loaded from: %s in %.2f seconds", target, time.perf_counter() - start)
    return result


def restore_backend(cls: type[Backend], entry: dict[str, Any], module: torch.nn.Module, graph: Any,
                    device: torch.device, artifacts_root: Path | None, retune: bool, module_name: str) -> Backend:
    """An active backend for one graph (with the precision class it was validated with)."""
    backend = _restore_backend(cls, entry, module, graph, device, artifacts_root, retune, module_name)
    if isinstance(entry.get("precision_class"), str):
        tf32 = entry.get("tf32")
        backend.validated_precision = {"precision_class": entry["precision_class"],
                                       "tf32": tf32 if isinstance(tf32, dict) else None}
    return backend


def _restore_backend(cls: type[Backend], entry: dict[str, Any], module: torch.nn.Module, graph: Any,
                     device: torch.device, artifacts_root: Path | None, retune: bool, module_name: str) -> Backend:
    """AOT artifacts load from the extracted files; JIT and eager backends (and graphs re-tuned
    after an incompatibility) build again from the module and the stored samples."""
    if entry.get("own_state") and not retune:
        # A backend written to AITune's contract restores itself (checkpoint/backend_state.py).
        from aitune.torch.checkpoint.backend_state import load_backend_state

        backend = cls.from_dict(module, load_backend_state(entry, artifacts_root))
        backend.deploy(device)
        return backend
    config = cls.config_class.from_dict(entry["config"])
    artifacts = {k: artifacts_root / v for k, v in entry["artifacts"].items()} if artifacts_root else {}
    if artifacts and not retune and hasattr(cls, "from_checkpoint"):
        backend = cls.from_checkpoint(config, artifacts, graph, device)
        if entry.get("profiles") is not None and backend.input_profile() is None:
            # An artifact loaded on its own does not know its shape range: keep the saved one, so
            # the input check holds and a checkpoint saved again still carries it.
            backend.restore_input_profile([tuple(p) if p is not None else None for p in entry["profiles"]])
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
    build_dir = Path(config_cache_dir()) / module_name / graph.name / "loaded" / f"{cls.__name__}_{config.key()}"
    backend = cls() if entry.get("own_state") else cls(config)  # AITune's backends configure themselves
    backend.build(module, graph, graph.samples, device, build_dir)
    return backend


def config_cache_dir() -> Path:
    return Path(config.cache_dir)
