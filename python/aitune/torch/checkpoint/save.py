"""ait.save: one `.ait` file — a stored ZIP with the JSON manifest first, weights and samples as
safetensors, backend artifacts as files; no pickle (docs/reference/checkpoint.md)."""

from __future__ import annotations

import datetime
import json
import logging
from pathlib import Path
from typing import Any, Iterator

import torch

import aitune
from aitune._native import _C
from aitune.torch.checkpoint.fingerprint import current_fingerprint
from aitune.torch.checkpoint.entry_writer import backend_entry
from aitune.torch.checkpoint.format import FORMAT, manifest_format_version
from aitune.torch.checkpoint.graphs import graph_to_json, sample_to_entries
from aitune.torch.checkpoint.storage import LocalTorchStorage, Sha512Recorder, abandoned_on_error
from aitune.torch.checkpoint.weights import pack_state_dict
from aitune.torch.config import config
from aitune.torch.graph.dynamic_shapes import to_json as dynamic_shapes_to_json
from aitune.torch.graph.signature import KIND_NAMES
from aitune.torch.module.state import ModuleState
from aitune.torch.module.wrapper import Module

logger = logging.getLogger("aitune")


def find_tuned_modules(obj: Any) -> list[tuple[str, Any]]:
    """(prefix, ait.Module) for every wrapped module in `obj`: the object itself, its
    submodules (nn.Module) or its attributes (any other pipeline object)."""
    if isinstance(obj, Module):
        return [("", obj)]
    if isinstance(obj, torch.nn.Module):
        return list(_tuned_submodules(obj, "", set()))
    return [(name, value) for name, value in vars(obj).items() if isinstance(value, Module)]


def _tuned_submodules(module: torch.nn.Module, prefix: str, seen: set[int]) -> Iterator[tuple[str, Module]]:
    """The ait.Modules among `module`'s submodules, by dotted path, each once. Walks `_modules`
    itself: named_modules() asks each child for its own submodules, and an ait.Module forwards that
    call to the module it wraps, which then reports itself, so the proxy was never seen."""
    for name, child in module._modules.items():
        if child is None or id(child) in seen:
            continue
        seen.add(id(child))
        if isinstance(child, Module):
            yield f"{prefix}{name}", child
        else:
            yield from _tuned_submodules(child, f"{prefix}{name}.", seen)


def save(
    module: Any,
    path: str | Path,
    storage: LocalTorchStorage | None = None,
    *,
    include_samples: bool = True,
    include_weights: bool = False,
) -> Path:
    storage = storage or LocalTorchStorage()
    target = storage.resolve(path)
    if target.exists() and not storage.overwrite_checkpoint_on_tune:
        raise FileExistsError(f"Checkpoint {target} already exists")
    tuned = find_tuned_modules(module)
    if not tuned:
        if isinstance(module, torch.nn.Module):
            raise RuntimeError("Module is not tuned. Cannot save state_dict.")
        raise ValueError("No tuned modules found in the pipeline")
    for _, m in tuned:
        if m.state is not ModuleState.TUNED:
            raise RuntimeError(f"Module is not tuned. Cannot save state_dict. (module '{m.name}' is {m.state.name})")
    target.parent.mkdir(parents=True, exist_ok=True)
    # sha_type="512" adds a SHA-512 of every entry to the manifest (SHA-256 is always there).
    writer = Sha512Recorder(_C.ArchiveWriter(str(target)), enabled=storage.sha_type == "512")
    with abandoned_on_error(writer):  # an error or Ctrl-C half-way leaves no temporary file
        _write_archive(writer, module, tuned, include_samples, include_weights)
    size = target.stat().st_size
    logger.info("✅ Checkpoint saved to %s [%s]", target, _human(size))
    return target


def _human(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{size} B"
        size /= 1024
    return f"{size} B"


def _write_archive(
    writer: Sha512Recorder, module: object, tuned: list, include_samples: bool, include_weights: bool
) -> None:
    """Every entry of the checkpoint of `tuned` (found in `module`), then its manifest."""
    version = manifest_format_version()
    modules = []
    first_device = None
    for index, (prefix, m) in enumerate(tuned):
        tm = m.tuned_module
        needs_weights = include_weights or tm.fallback_policy == "eager" or any(b.is_jit for _, b in tm.backends)
        weights = None
        if needs_weights:
            data, aliases, extra = pack_state_dict(m.module.state_dict())
            weights = {"entry": f"modules/{index}/weights.safetensors", "aliases": aliases, "extra_state": extra}
            writer.add_bytes(weights["entry"], data)
        graphs = []
        for graph, backend in tm.backends:
            graph_prefix = f"modules/{index}/graphs/{graph.name}"
            first_device = first_device or backend.device
            entry = graph_to_json(graph)
            entry["backend"] = backend_entry(backend, writer, graph_prefix, version)
            entry["samples"] = []
            if include_samples:
                refs = graph.reference_outputs
                for n, sample in enumerate(graph.samples):
                    packed = sample_to_entries(sample, refs[n] if n < len(refs) else None)
                    if packed is None:
                        continue
                    blob, skeleton = packed
                    writer.add_bytes(f"{graph_prefix}/samples/{n}.safetensors", blob)
                    writer.add_bytes(f"{graph_prefix}/samples/{n}.json", json.dumps(skeleton).encode())
                    entry["samples"].append(f"{graph_prefix}/samples/{n}")
            graphs.append(entry)
        recorder = m.recorder
        modules.append(
            {
                "name": m.name,
                "prefix": prefix,
                "class": f"{type(m.module).__module__}.{type(m.module).__qualname__}",
                "strict_mode": tm.strict,
                "fallback_policy": tm.fallback_policy,
                "weights": weights,
                "forward_signature": [
                    {"name": n, "kind": KIND_NAMES[k], "has_default": d} for n, k, d in recorder.params
                ],
                "dynamic_shapes": dynamic_shapes_to_json(recorder.dynamic_shapes),
                "graphs": graphs,
            }
        )
    root: dict[str, Any] = {
        "kind": "module" if isinstance(module, torch.nn.Module) else "pipeline",
        "class": f"{type(module).__module__}.{type(module).__qualname__}",
        "weights": None,
    }
    if isinstance(module, torch.nn.Module) and tuned[0][0] != "":
        prefixes = tuple(f"{p}." for p, _ in tuned)
        rest = {k: v for k, v in module.state_dict().items() if not k.startswith(prefixes)}
        if rest:
            data, aliases, extra = pack_state_dict(rest)
            writer.add_bytes("weights/root.safetensors", data)
            root["weights"] = {"entry": "weights/root.safetensors", "aliases": aliases, "extra_state": extra}
    manifest = {
        "format": FORMAT,
        "format_version": version,
        "aitune_version": aitune.__version__,
        "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fingerprint": current_fingerprint(first_device),
        "config": {"device_after_tuning": config.device_after_tuning},
        "root": root,
        "modules": modules,
        "files": writer.files(),
    }
    if writer.enabled:
        manifest["sha512"] = writer.digests
    writer.finish(json.dumps(manifest, indent=1))
