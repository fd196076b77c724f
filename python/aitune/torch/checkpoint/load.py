"""ait.load: verify a `.ait` file, then put its tuned modules back into an object (docs/reference/checkpoint.md).

Everything is read and checked (format, listing, hashes, fingerprint) before the object is
touched, so a bad file leaves the object as it was. Nothing is unpickled."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import torch

from aitune._native import _C
from aitune.exceptions import (
    AITuneError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    UnsupportedCheckpointError,
)
from aitune.torch.backend.backend import Backend
from aitune.torch.checkpoint.fingerprint import current_fingerprint, mismatches
from aitune.torch.checkpoint.graphs import graph_from_json, sample_from_entries
from aitune.torch.checkpoint.storage import LocalTorchStorage, verify_sha512
from aitune.torch.checkpoint.weights import unpack_state_dict
from aitune.torch.config import config
from aitune.torch.module.graph_spec import Sample
from aitune.torch.module.signature import KIND_NAMES
from aitune.torch.utils.tensors import to_device

logger = logging.getLogger("aitune")
_KIND_NUMBERS = {name: number for number, name in KIND_NAMES.items()}


def _all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


def backend_class(name: str) -> type[Backend]:
    """The Backend subclass with this qualified name, at any depth (docs/guide.md "Threat model"):
    aitune's own backends and custom backends whose module the program has imported. Nothing is
    imported because a checkpoint names it."""
    import aitune.torch.backend  # noqa: F401 - aitune's own backends (not a name from the file)

    for cls in _all_subclasses(Backend):
        if f"{cls.__module__}.{cls.__qualname__}" == name:
            return cls
    raise UnsupportedCheckpointError(
        f"Unknown backend type: {name}. A custom backend must be imported (its module loaded) before ait.load: "
        "aitune never imports a module that a checkpoint names."
    )


class OpenedCheckpoint:
    """A verified archive: manifest, file records, and read helpers."""

    def __init__(self, path: Path, verify: str) -> None:
        if not path.exists():
            raise CheckpointNotFoundError(f"Checkpoint file not found: {path}")
        self.path = path
        self.reader = _C.ArchiveReader(str(path))  # refuses non-regular files, damaged ZIP structure
        names = set(self.reader.entry_names())
        if "state_dict.pt" in names or any(n.endswith("/state_dict.pt") for n in names):
            raise UnsupportedCheckpointError(
                f"{path} is a checkpoint of the reference implementation: it stores a pickled state that would "
                "execute code when loaded, so aitune refuses it. Re-tune the model and save it with aitune."
            )
        # The schema check the C++ runtime runs too (format, version, types, nesting, names, every
        # referenced file listed under its own module's and graph's folder); parsed after it passed.
        self.manifest = json.loads(self.reader.validated_manifest())
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
        verify_sha512(self.sha512, lambda name: (folder / name).read_bytes(), set(self.records))
        return folder


def _resolve_target(obj: Any, prefix: str) -> tuple[Any, str, Any]:
    """(parent, attribute, current value) for a module prefix inside `obj`. The schema allows no
    dunder parts; the value must be a module (or None when absent), so a file can only ever make
    ait.load replace a module."""
    parent = obj
    parts = prefix.split(".")
    for part in parts[:-1]:
        parent = getattr(parent, part)
    current = getattr(parent, parts[-1], None)
    if current is not None and not isinstance(current, torch.nn.Module):
        raise AttributeError(f"{prefix} is a {type(current).__name__}, not a module")
    return parent, parts[-1], current


def load(module: Any, path: str | Path, storage: LocalTorchStorage | None = None, device_map: dict | None = None,
         disable_external_logging: bool = True, *, on_incompatible: str = "raise", verify: str | None = None) -> Any:
    start = time.perf_counter()
    if on_incompatible not in ("raise", "retune"):
        raise ValueError(f"on_incompatible must be 'raise' or 'retune', got {on_incompatible!r}")
    verify = verify or os.environ.get("AITUNE_VERIFY_CHECKPOINT", "fast")
    if verify not in ("fast", "full"):
        raise ValueError(f"verify must be 'fast' or 'full', got {verify!r}")
    storage = storage or LocalTorchStorage()
    # As ait.save wrote it (base folder, ".ait"), unless the path names an existing file as is.
    target = Path(path) if Path(path).is_absolute() and Path(path).is_file() else storage.resolve(path)
    ckpt = OpenedCheckpoint(target, verify)
    if ckpt.manifest.get("kind") == "aitune.results":
        raise UnsupportedCheckpointError(
            f"{target} is a file of aitune's tuning-results store (it holds no weights and serves only the "
            "module it was tuned for), not a checkpoint: save the tuned module with ait.save"
        )
    with _as_corrupt(target):
        located, retune, device_map = _locate_and_check(ckpt, module, dict(device_map or {}), on_incompatible)
        prepared, root_weights, artifacts_root = _read_everything(ckpt, located)
    result = _install(module, prepared, root_weights, artifacts_root, retune, device_map, target)
    logger.info("✅ Checkpoint loaded from: %s in %.2f seconds", target, time.perf_counter() - start)
    return result


@contextlib.contextmanager
def _as_corrupt(path: Path) -> Iterator[None]:
    """Anything but aitune's documented errors (and the ValueErrors the API documents) while the
    checkpoint is read and checked means the file is damaged: CorruptCheckpointError, naming the
    file and the original error (docs/guide.md "Threat model")."""
    try:
        yield
    except (AITuneError, _DocumentedValueError):
        raise
    except RecursionError as e:
        raise CorruptCheckpointError(f"Checkpoint {path} is corrupt: a structure nests too deeply ({e})") from e
    except Exception as e:  # noqa: BLE001 - KeyError, TypeError, SafetensorError, UnicodeDecodeError, ...
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise CorruptCheckpointError(f"Checkpoint {path} is corrupt: {type(e).__name__}: {first}") from e


class _DocumentedValueError(ValueError):
    """The ValueErrors ait.load documents (device_map, modules not found): passed through."""


def _locate_and_check(ckpt: OpenedCheckpoint, module: Any, device_map: dict,
                      on_incompatible: str) -> tuple[list, set, dict]:
    """Locates every saved module in the object and checks the environment, changing nothing."""
    from aitune.torch.module.wrapper import Module

    manifest = ckpt.manifest
    entries = manifest["modules"]
    unknown = sorted(set(device_map) - {e["name"] for e in entries})
    if unknown:
        raise _DocumentedValueError(f"Some modules in the device_map were not found: {unknown}")
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
        raise _DocumentedValueError(f"Some modules in the state_dict were not found in the pipeline: {missing}")

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
    return located, retune, device_map


def _read_everything(ckpt: OpenedCheckpoint, located: list) -> tuple[list, Any, Path | None]:
    """Weights, samples and artifacts (hash-verified), read before the object is touched."""
    manifest = ckpt.manifest
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
            # An unknown backend or a config its class refuses fails now, before anything changes.
            cls = backend_class(g["backend"]["class"])
            own_state = g["backend"].get("own_state")  # AITune-contract backends restore themselves
            config = None if own_state else cls.config_class.from_dict(g["backend"]["config"])
            graph = graph_from_json(g, params, None)
            for sample_prefix in g["samples"]:
                skeleton = ckpt.read(f"{sample_prefix}.json").decode("utf-8")
                _C.check_json_nesting(skeleton, f"{sample_prefix}.json")
                sample, reference = sample_from_entries(ckpt.read(f"{sample_prefix}.safetensors"),
                                                        json.loads(skeleton))
                _check_sample_fits(graph, sample, entry["strict_mode"])
                graph.samples.append(sample)
                if reference is not None:
                    graph.reference_outputs.append(reference)
            graphs.append((graph, g["backend"], cls, config))
        prepared.append((entry, holder, plain, weights, graphs))
    root_weights = None
    if manifest["root"].get("weights"):
        w = manifest["root"]["weights"]
        root_weights = unpack_state_dict(ckpt.read(w["entry"]), w["aliases"], w["extra_state"])
    return prepared, root_weights, artifacts_root


def _check_sample_fits(graph: Any, sample: Sample, strict: bool) -> None:
    """A stored sample flattens to the leaves the graph's input spec lists (same count, tensors
    where it has tensors): a spec edited apart from its key would otherwise pair the call's leaves
    with the wrong rules. The dispatcher checks the same on every call (for files without samples)."""
    from aitune.torch.module.graph_spec import TensorLeaf

    _, leaves = _C.flatten_call(_C.Signature(graph.forward_params), sample.args, sample.kwargs, strict, -1)
    expected = [isinstance(leaf, TensorLeaf) for leaf in graph.input_spec.leaves]
    if [bool(is_tensor) for _, _, is_tensor, _ in leaves] != expected:
        raise CorruptCheckpointError(
            f"graph '{graph.name}': its stored sample has {len(leaves)} input leaves "
            f"({sum(1 for leaf in leaves if leaf[2])} tensors) but its input spec lists {len(expected)} "
            f"({sum(expected)} tensors): the manifest is inconsistent"
        )


def _install(module: Any, prepared: list, root_weights: Any, artifacts_root: Path | None, retune: set,
             device_map: dict, target: Path) -> Any:
    """Builds the backends (module weights first: JIT and eager backends serve them) and puts the
    tuned modules in place."""
    from aitune.torch.module.wrapper import Module

    result = module
    for entry, holder, plain, weights, graphs in prepared:
        if weights is not None:
            plain.load_state_dict(weights, strict=False)
        served = []
        for graph, b, cls, config in graphs:
            device = torch.device(device_map.get(entry["name"]) or b.get("device") or "cpu")
            backend = restore_backend(cls, b, plain, graph, device, artifacts_root,
                                      retune=(entry["name"], graph.name) in retune, module_name=entry["name"],
                                      config=config, path=target)
            served.append((graph, backend))
        wrapped = Module(plain, entry["name"], fallback_policy=entry["fallback_policy"])
        wrapped.restore([g for g, _ in served], served, entry["strict_mode"])
        if holder is None:
            result = wrapped
        else:
            parent, attr, _ = holder
            setattr(parent, attr, wrapped)
    if root_weights is not None and isinstance(module, torch.nn.Module):
        module.load_state_dict(root_weights, strict=False)
    return result


def restore_backend(cls: type[Backend], entry: dict[str, Any], module: torch.nn.Module, graph: Any,
                    device: torch.device, artifacts_root: Path | None, retune: bool, module_name: str,
                    config: Any = None, path: Path | None = None) -> Backend:
    """An active backend for one graph (with the precision class it was validated with)."""
    if config is None and not entry.get("own_state"):
        config = cls.config_class.from_dict(entry["config"])
    backend = _restore_backend(cls, config, entry, module, graph, device, artifacts_root, retune, module_name, path)
    if isinstance(entry.get("precision_class"), str):
        tf32 = entry.get("tf32")
        backend.validated_precision = {"precision_class": entry["precision_class"],
                                       "tf32": tf32 if isinstance(tf32, dict) else None}
    return backend


def _restore_backend(cls: type[Backend], config: Any, entry: dict[str, Any], module: torch.nn.Module, graph: Any,
                     device: torch.device, artifacts_root: Path | None, retune: bool, module_name: str,
                     path: Path | None) -> Backend:
    """AOT artifacts load from the extracted files; JIT and eager backends (and graphs re-tuned
    after an incompatibility) build again from the module and the stored samples."""
    if entry.get("own_state") and not retune:
        # A backend written to AITune's contract restores itself (checkpoint/backend_state.py).
        from aitune.torch.checkpoint.backend_state import load_backend_state

        with _as_corrupt(path or Path("?")):
            state = load_backend_state(entry, artifacts_root)
        backend = cls.from_dict(module, state)
        backend.deploy(device)
        return backend
    artifacts = {}
    if artifacts_root is not None:
        root = artifacts_root.resolve()
        for key, entry_path in entry["artifacts"].items():
            artifact = (artifacts_root / entry_path).resolve()
            if root not in artifact.parents:  # the schema allows none; a second guard for a path that is opened
                raise CorruptCheckpointError(f"Entry '{entry_path}' resolves outside checkpoint")
            artifacts[key] = artifact
    if artifacts and not retune and hasattr(cls, "from_checkpoint"):
        with _as_corrupt(path or Path("?")):
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
    # The stored samples come back on the CPU; a rebuild (torch.compile's warm-up, CUDA-graph
    # capture) must see them where the weights are.
    graph.samples = [Sample(*to_device((s.args, s.kwargs), device), s.batch_size) for s in graph.samples]
    backend = cls() if entry.get("own_state") else cls(config)  # AITune's backends configure themselves
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
