"""ait.save: one `.ait` file — a stored ZIP with the JSON manifest first, weights and samples as
safetensors, backend artifacts as files; no pickle (docs/reference/checkpoint.md)."""

from __future__ import annotations

import datetime
import json
import logging
from pathlib import Path
from typing import Any

import torch

import aitune
from aitune._native import _C
from aitune.torch.backend.backend import ArtifactPath, Backend
from aitune.torch.checkpoint.fingerprint import current_fingerprint
from aitune.torch.checkpoint.graphs import graph_to_json, sample_to_entries
from aitune.torch.checkpoint.storage import LocalTorchStorage, Sha512Recorder
from aitune.torch.checkpoint.weights import pack_state_dict
from aitune.torch.config import config
from aitune.torch.dynamic_shapes import to_json as dynamic_shapes_to_json
from aitune.torch.module.signature import KIND_NAMES
from aitune.torch.module.state import ModuleState

logger = logging.getLogger("aitune")
FORMAT = "aitune.checkpoint"
FORMAT_VERSION = 1


def find_tuned_modules(obj: Any) -> list[tuple[str, Any]]:
    """(prefix, ait.Module) for every wrapped module in `obj`: the object itself, its
    submodules (nn.Module) or its attributes (any other pipeline object)."""
    from aitune.torch.module.wrapper import Module

    if isinstance(obj, Module):
        return [("", obj)]
    if isinstance(obj, torch.nn.Module):
        return [(name, m) for name, m in obj.named_modules() if isinstance(m, Module)]
    return [(name, value) for name, value in vars(obj).items() if isinstance(value, Module)]


def _requires(backend: Backend, device: torch.device | None) -> list[str]:
    """Fingerprint fields a backend's artifact depends on (docs/reference/checkpoint.md#integrity-and-compatibility)."""
    if backend.is_jit:
        return []  # JIT and eager backends rebuild from weights and samples
    own = getattr(backend, "fingerprint_requires", None)
    if own is not None:  # artifacts that do not depend on torch (a TensorRT plan) name their own fields
        return own(device)
    fields = ["torch"]
    if device is not None and device.type == "cuda":
        fields += ["gpu_sm", "cuda_major"]
    return fields


def _backend_entry(backend: Backend, writer: Any, prefix: str, device: torch.device | None) -> dict[str, Any]:
    data = backend.to_dict()
    if type(backend)._contract.own_state:
        return _own_state_entry(backend, data, writer, prefix, device)
    artifacts = {}
    for key, value in list(data.items()):
        if isinstance(value, ArtifactPath):
            name = f"{prefix}/backend/{Path(value.relative_path).as_posix()}"
            writer.add_file(name, str(value.path))
            artifacts[key] = name
            del data[key]
    native = backend.saved_native_io() if artifacts and not backend.is_jit else None
    return {
        "class": data.pop("class"), "config": data.pop("config"), "extra": data,
        # For runtimes without Python (C++ Runtime, CLI): which tensor input feeds each native
        # input, and the access path of each native output.
        "input_order": list(native[0]) if native else None,
        "output_paths": _output_paths(native) if native else None,
        # The class the outputs were judged by when tuning (e.g. tf32 for an fp32 model on CUDA),
        # and torch's TF32 switches then: every later check (aitune run --check) uses the same.
        "precision_class": _precision(backend)["precision_class"], "tf32": _precision(backend)["tf32"],
        "is_jit": backend.is_jit,
        "native": bool(artifacts) and not backend.is_jit,
        "runtime": {"use_cuda_graphs": bool(getattr(backend.config, "use_cuda_graphs", False))},
        "profiles": backend.input_profile(), "artifacts": artifacts, "requires": _requires(backend, device),
        "device": str(backend.device) if backend.device is not None else None,
    }


def _own_state_entry(backend: Backend, state: dict[str, Any], writer: Any, prefix: str,
                     device: torch.device | None) -> dict[str, Any]:
    """A backend written to AITune's contract: its to_dict() state, restored by its from_dict()
    (checkpoint/backend_state.py)."""
    from aitune.torch.checkpoint.backend_state import save_backend_state

    cls = type(backend)
    stored = save_backend_state(f"{cls.__name__}.to_dict()", state, writer, f"{prefix}/backend")
    return {
        "class": f"{cls.__module__}.{cls.__qualname__}", "config": {}, "extra": {}, "own_state": True,
        "state": stored["state"], "state_tensors": stored["state_tensors"], "artifacts": stored["artifacts"],
        "input_order": None, "output_paths": None,
        "precision_class": _precision(backend)["precision_class"], "tf32": _precision(backend)["tf32"],
        "is_jit": bool(backend.is_jit), "native": False, "runtime": {"use_cuda_graphs": False},
        "profiles": backend.input_profile(), "requires": _requires(backend, device),
        "device": str(backend.device) if backend.device is not None else None,
    }


def _precision(backend: Backend) -> dict[str, Any]:
    validated = backend.validated_precision or {}
    return {"precision_class": validated.get("precision_class") or backend.precision_class,
            "tf32": validated.get("tf32")}


def _output_paths(native: tuple) -> list[str]:
    _, rebuild, count = native
    if rebuild is None:
        return ["output"]
    # Rebuilding integer placeholders shows where each native output lands in the structure.
    probe = rebuild(list(range(count)))
    _, leaves = _C.flatten_value(probe)
    paths: dict[int, str] = {}
    from aitune.torch.module.locator import access_path

    for steps, value, _, _ in leaves:
        if isinstance(value, int):
            paths[value] = access_path(steps, "output")
    return [paths[i] for i in sorted(paths)]


def save(module: Any, path: str | Path, storage: LocalTorchStorage | None = None, *, include_samples: bool = True,
         include_weights: bool = False) -> Path:
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
            entry["backend"] = _backend_entry(backend, writer, graph_prefix, backend.device)
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
        modules.append({
            "name": m.name, "prefix": prefix, "class": f"{type(m.module).__module__}.{type(m.module).__qualname__}",
            "strict_mode": tm.strict, "fallback_policy": tm.fallback_policy, "weights": weights,
            "forward_signature": [{"name": n, "kind": KIND_NAMES[k], "has_default": d} for n, k, d in recorder.params],
            "dynamic_shapes": dynamic_shapes_to_json(recorder.dynamic_shapes), "graphs": graphs,
        })
    root: dict[str, Any] = {"kind": "module" if isinstance(module, torch.nn.Module) else "pipeline",
                            "class": f"{type(module).__module__}.{type(module).__qualname__}", "weights": None}
    if isinstance(module, torch.nn.Module) and tuned[0][0] != "":
        prefixes = tuple(f"{p}." for p, _ in tuned)
        rest = {k: v for k, v in module.state_dict().items() if not k.startswith(prefixes)}
        if rest:
            data, aliases, extra = pack_state_dict(rest)
            writer.add_bytes("weights/root.safetensors", data)
            root["weights"] = {"entry": "weights/root.safetensors", "aliases": aliases, "extra_state": extra}
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "aitune_version": aitune.__version__,
        "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fingerprint": current_fingerprint(first_device), "config": {"device_after_tuning": config.device_after_tuning},
        "root": root, "modules": modules, "files": writer.files(),
    }
    if writer.enabled:
        manifest["sha512"] = writer.digests
    writer.finish(json.dumps(manifest, indent=1))
    size = target.stat().st_size
    logger.info("✅ Checkpoint saved to %s [%s]", target, _human(size))
    return target


def _human(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{size} B"
        size /= 1024
    return f"{size} B"
