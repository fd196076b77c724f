"""ait.load: verify a `.ait` file, then put its tuned modules back into an object (docs/reference/checkpoint.md).

Everything is read and checked (format, listing, hashes, fingerprint) before the object is
touched, so a bad file leaves the object as it was. Nothing is unpickled."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch

from aitune._native import _C
from aitune.exceptions import CorruptCheckpointError, IncompatibleCheckpointError, UnsupportedCheckpointError
from aitune.torch.checkpoint.fingerprint import current_fingerprint, mismatches
from aitune.torch.checkpoint.corrupt import as_corrupt
from aitune.torch.checkpoint.format import OpenedCheckpoint, resolve_backend, shown_name
from aitune.torch.checkpoint.graphs import graph_from_native, sample_from_entries
from aitune.torch.checkpoint.restore import config_of, restore_backend
from aitune.torch.checkpoint.storage import LocalTorchStorage
from aitune.torch.checkpoint.weights import unpack_state_dict
from aitune.torch.graph.dynamic_shapes import from_json as dynamic_shapes_from_json
from aitune.torch.graph.graph_spec import GraphSpec, Sample, TensorLeaf
from aitune.torch.graph.signature import KIND_NAMES
from aitune.torch.module.wrapper import Module

logger = logging.getLogger("aitune")
_KIND_NUMBERS = {name: number for number, name in KIND_NAMES.items()}


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


def load(
    module: Any,
    path: str | Path,
    storage: LocalTorchStorage | None = None,
    device_map: dict | None = None,
    disable_external_logging: bool = True,
    *,
    on_incompatible: str = "raise",
    verify: str | None = None,
) -> Any:
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
    manifest = ckpt.manifest
    if manifest.kind == _C.MANIFEST_RESULTS_KIND:
        raise UnsupportedCheckpointError(
            f"{target} is a file of aitune's tuning-results store (it holds no weights and serves only the "
            "module it was tuned for), not a checkpoint: save the tuned module with ait.save"
        )
    with _as_corrupt(target):
        located, retune, device_map = _locate_and_check(manifest, module, dict(device_map or {}), on_incompatible)
        prepared, root_weights, artifacts_root = _read_everything(ckpt, manifest, located)
    result = _install(module, prepared, root_weights, artifacts_root, retune, device_map, target)
    logger.info("✅ Checkpoint loaded from: %s in %.2f seconds", target, time.perf_counter() - start)
    return result


def _as_corrupt(path: Path) -> contextlib.AbstractContextManager[None]:
    """Checkpoint errors as CorruptCheckpointError, letting the ValueErrors ait.load documents through."""
    return as_corrupt(path, (_DocumentedValueError,))


class _DocumentedValueError(ValueError):
    """The ValueErrors ait.load documents (device_map, modules not found): passed through."""


def _locate_and_check(
    manifest: _C.Manifest, module: Any, device_map: dict, on_incompatible: str
) -> tuple[list, set, dict]:
    """Locates every saved module in the object and checks the environment, changing nothing."""
    entries = manifest.modules
    unknown = sorted(set(device_map) - {e.name for e in entries})
    if unknown:
        raise _DocumentedValueError(f"Some modules in the device_map were not found: {unknown}")
    located = []
    missing = {}
    for entry in entries:
        if entry.prefix == "":
            current = module
            holder = None
        else:
            try:
                holder = _resolve_target(module, entry.prefix)
                current = holder[2]
            except AttributeError:
                current = None
        if current is None:
            missing[entry.name] = entry.prefix
            continue
        plain = current.__wrapped__ if isinstance(current, Module) else current
        located.append((entry, holder, plain))
    if missing:
        raise _DocumentedValueError(f"Some modules in the state_dict were not found in the pipeline: {missing}")

    saved_fp = manifest.fingerprint
    problems = []
    unavailable = []
    retune: set[tuple[str, str]] = set()
    for entry, _, _ in located:
        for g in entry.graphs:
            device = _graph_device(entry.name, g.name, device_map.get(entry.name) or g.backend.device)
            if not _device_present(device):
                count = torch.cuda.device_count() if torch.cuda.is_available() else 0
                unavailable.append(
                    (
                        "device",
                        str(device),
                        f"{count} CUDA device(s) here",
                        f"module '{entry.name}' graph '{g.name}'; to load it elsewhere pass "
                        f"device_map={{'{entry.name}': 'cpu'}} (or another device present) to ait.load",
                    )
                )
                continue
            current_fp = current_fingerprint(device)
            found = mismatches(
                saved_fp,
                current_fp,
                g.backend.requires,
                f"{shown_name(g.backend).rsplit('.', 1)[-1]} of module '{entry.name}' graph '{g.name}'",
            )
            if found and on_incompatible == "retune":
                retune.add((entry.name, g.name))
            problems += found
    if unavailable:  # no retune helps either: there is nothing to build on
        raise IncompatibleCheckpointError(unavailable + problems)
    if problems and on_incompatible == "raise":
        raise IncompatibleCheckpointError(problems)
    return located, retune, device_map


def _graph_device(module_name: str, graph_name: str, name: str | None) -> torch.device:
    """The device a graph is restored on: the caller's device_map entry, else the one saved."""
    try:
        return torch.device(name or "cpu")
    except (RuntimeError, TypeError) as e:
        raise CorruptCheckpointError(
            f"module '{module_name}' graph '{graph_name}': device {name!r} is not a torch device: {e}"
        ) from e


def _device_present(device: torch.device) -> bool:
    """Whether this process can put tensors on `device` (a CUDA index beyond the devices present,
    or CUDA without a driver, would raise a raw RuntimeError deep in the restore)."""
    if device.type != "cuda":
        return True
    if not torch.cuda.is_available():
        return False
    return device.index is None or device.index < torch.cuda.device_count()


def _read_everything(
    ckpt: OpenedCheckpoint, manifest: _C.Manifest, located: list
) -> tuple[list, dict[str, torch.Tensor] | None, Path | None]:
    """Weights, samples and artifacts (hash-verified), read before the object is touched."""
    artifacts_root = ckpt.extract_all() if any(g.backend.artifacts for e, _, _ in located for g in e.graphs) else None
    prepared = []
    for entry, holder, plain in located:
        weights = None
        if entry.weights:
            w = entry.weights
            weights = unpack_state_dict(ckpt.read(w["entry"]), w["aliases"], w["extra_state"])
        params = [(p.name, _KIND_NUMBERS[p.kind], p.has_default) for p in entry.forward_signature]
        # The user's DynamicDim/BatchDim definitions: a rebuild (JIT, eager, a re-tune) and any later
        # recording of the loaded module use the same axis ranges as the tuning did.
        dynamic_shapes = dynamic_shapes_from_json(entry.dynamic_shapes)
        graphs = []
        for g in entry.graphs:
            # An unknown backend or a config its class refuses fails now, before anything changes.
            cls = resolve_backend(g.backend)
            config = config_of(cls, g.backend)
            graph = graph_from_native(g, params, dynamic_shapes)
            for sample_prefix in g.samples:
                skeleton = ckpt.read(f"{sample_prefix}.json").decode("utf-8")
                _C.check_json_nesting(skeleton, f"{sample_prefix}.json")
                sample, reference = sample_from_entries(ckpt.read(f"{sample_prefix}.safetensors"), json.loads(skeleton))
                _check_sample_fits(graph, sample, entry.strict_mode)
                graph.samples.append(sample)
                if reference is not None:
                    graph.reference_outputs.append(reference)
            graphs.append((graph, g.backend, cls, config))
        prepared.append((entry, holder, plain, weights, graphs, dynamic_shapes))
    root_weights = None
    if manifest.root.weights:
        w = manifest.root.weights
        root_weights = unpack_state_dict(ckpt.read(w["entry"]), w["aliases"], w["extra_state"])
    return prepared, root_weights, artifacts_root


def _check_sample_fits(graph: GraphSpec, sample: Sample, strict: bool) -> None:
    """A stored sample flattens to the leaves the graph's input spec lists (same count, tensors
    where it has tensors): a spec edited apart from its key would otherwise pair the call's leaves
    with the wrong rules. The dispatcher checks the same on every call (for files without samples).
    Its key is the graph's key: a key no call of the graph makes would load, then refuse every call
    (GraphNotFoundError); the schema checks what it can of the key without a sample."""
    key, leaves = _C.flatten_call(_C.Signature(graph.forward_params), sample.args, sample.kwargs, strict, -1)
    if graph.llm_phase is None and list(key.tokens) != list(graph.key.tokens):
        raise CorruptCheckpointError(
            f"graph '{graph.name}': its key_tokens do not match its stored sample's call (the manifest is "
            f"inconsistent); expected {len(key.tokens)} tokens starting {list(key.tokens)[:6]}, got "
            f"{len(graph.key.tokens)} starting {list(graph.key.tokens)[:6]}"
        )
    expected = [isinstance(leaf, TensorLeaf) for leaf in graph.input_spec.leaves]
    if [leaf.is_tensor for leaf in leaves] != expected:
        raise CorruptCheckpointError(
            f"graph '{graph.name}': its stored sample has {len(leaves)} input leaves "
            f"({sum(1 for leaf in leaves if leaf.is_tensor)} tensors) but its input spec lists {len(expected)} "
            f"({sum(expected)} tensors): the manifest is inconsistent"
        )


def _install(
    module: Any,
    prepared: list,
    root_weights: dict[str, torch.Tensor] | None,
    artifacts_root: Path | None,
    retune: set,
    device_map: dict,
    target: Path,
) -> Any:
    """Builds the backends (module weights first: JIT and eager backends serve them) and puts the
    tuned modules in place."""
    result = module
    for entry, holder, plain, weights, graphs, dynamic_shapes in prepared:
        if weights is not None:
            plain.load_state_dict(weights, strict=False)
        served = []
        for graph, b, cls, config in graphs:
            device = _graph_device(entry.name, graph.name, device_map.get(entry.name) or b.device)
            backend = restore_backend(
                cls,
                b,
                plain,
                graph,
                device,
                artifacts_root,
                retune=(entry.name, graph.name) in retune,
                module_name=entry.name,
                config=config,
                path=target,
            )
            served.append((graph, backend))
        wrapped = Module(plain, entry.name, dynamic_shapes=dynamic_shapes, fallback_policy=entry.fallback_policy)
        wrapped.restore([g for g, _ in served], served, entry.strict_mode)
        if holder is None:
            result = wrapped
        else:
            parent, attr, _ = holder
            setattr(parent, attr, wrapped)
    if root_weights is not None and isinstance(module, torch.nn.Module):
        module.load_state_dict(root_weights, strict=False)
    return result
