"""The backend entry written for a built backend (`modules[].graphs[].backend`,
docs/reference/checkpoint.md#layout-and-manifest). The one Python place that names the entry's
fields: the native reader (cpp/core/checkpoint/manifest_backend.cc, the schema check and reader,
and manifest.h, the typed entry) is the other; Python reads entries back as `_C.ManifestBackend`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aitune.torch.backend import registry
from aitune.torch.backend.backend import ArtifactPath, Backend, ServingPlan, saved_plan
from aitune.torch.checkpoint.backend_state import EntryWriter, save_backend_state


def backend_entry(backend: Backend, writer: EntryWriter, prefix: str, version: int) -> dict[str, Any]:
    """The manifest entry of a built backend in format `version`; its artifacts are written under
    `<prefix>/backend/`."""
    cls = type(backend)
    name = registry.name_of(cls)
    entry: dict[str, Any] = {"name": name} if version >= 2 else {"class": registry.format1_class_for_name(name)}
    if cls._contract.own_state:
        # A backend written to AITune's contract: its to_dict() state, restored by its from_dict().
        stored = save_backend_state(f"{cls.__name__}.to_dict()", backend.to_dict(), writer, f"{prefix}/backend")
        entry.update({"config": {}, "extra": {}, "own_state": True, "state": stored.skeleton})
        entry.update({"state_tensors": stored.tensors_entry, "artifacts": stored.entries})
        entry.update(_serving(backend, None, native=False, cuda_graphs=False))
    else:
        data = backend.to_dict()
        data.pop("class", None)
        config = data.pop("config")
        artifacts = {}
        for key, value in list(data.items()):
            if isinstance(value, ArtifactPath):
                entry_name = f"{prefix}/backend/{Path(value.relative_path).as_posix()}"
                writer.add_file(entry_name, str(value.path))
                artifacts[key] = entry_name
                del data[key]
        native = bool(artifacts) and not backend.is_jit
        entry.update({"config": config, "extra": data})
        entry.update(_serving(backend, saved_plan(backend) if native else None, native, backend.cuda_graphs.requested))
        entry["artifacts"] = artifacts
    entry["requires"] = backend.requirements()
    entry["device"] = str(backend.device) if backend.device is not None else None
    return entry


def _serving(backend: Backend, plan: ServingPlan | None, native: bool, cuda_graphs: bool) -> dict[str, Any]:
    """How the graph is served and was judged."""
    validated = backend.validated_precision or {}
    return {
        # For runtimes without Python (C++ Runtime, CLI): which tensor input feeds each native
        # input, and the access path of each native output.
        "input_order": list(plan.input_order) if plan else None,
        "output_paths": _output_paths(plan) if plan else None,
        # The class the outputs were judged by when tuning (e.g. tf32 for an fp32 model on CUDA),
        # and torch's TF32 switches then: every later check (aitune run --check) uses the same.
        "precision_class": validated.get("precision_class") or backend.precision_class,
        "tf32": validated.get("tf32"),
        "is_jit": bool(backend.is_jit),
        "native": native,
        # Earlier readers' copy; the backend config's own switch decides (manifest.h).
        "runtime": {"use_cuda_graphs": cuda_graphs},
        "profiles": backend.input_profile(),
    }


def _output_paths(plan: ServingPlan) -> list[str]:
    """The access path of each native output, e.g. `output[1]["logits"]` (the C++ runtime names outputs by them)."""
    outputs = plan.outputs
    if outputs is None or not outputs.known:
        raise RuntimeError("the output structure of a native serving plan is not known: the graph has not run yet")
    return list(outputs.access or [])
