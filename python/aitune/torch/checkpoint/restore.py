"""The backend restored from a graph's backend entry (docs/reference/checkpoint.md, "Restoring a
backend"): an AITune-contract backend from its own state, an AOT backend from its artifacts, a JIT
or eager one (or one re-tuned after an incompatibility) built again from the module and the stored
samples. Used by ait.load and the results store."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path

import torch

from aitune._native import _C
from aitune.torch.backend.backend import Backend, BackendConfig
from aitune.torch.checkpoint.backend_state import load_backend_state
from aitune.torch.checkpoint.corrupt import as_corrupt
from aitune.torch.checkpoint.paths import resolve_entry
from aitune.torch.config import config
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.utils.tensors import to_device

logger = logging.getLogger("aitune")


def config_of(cls: type[Backend], entry: _C.ManifestBackend) -> BackendConfig | None:
    """The backend's config (None for AITune-contract backends, which configure themselves)."""
    return None if entry.own_state else cls.config_class.from_dict(entry.config)


def restore_backend(
    cls: type[Backend],
    entry: _C.ManifestBackend,
    module: torch.nn.Module,
    graph: GraphSpec,
    device: torch.device,
    artifacts_root: Path | None,
    retune: bool,
    module_name: str,
    config: BackendConfig | None = None,
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
    config: BackendConfig | None,
    entry: _C.ManifestBackend,
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
            state = load_backend_state(entry.state, entry.state_tensors, artifacts_root, f"{where} backend state")
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
    # Construction reads the checkpoint's config: a custom backend that fails on it (a crafted
    # config without its fields) fails as the file's error, like a restore.
    with as_corrupt(path or Path("?")):
        backend = cls() if entry.own_state else cls(config)  # AITune's backends configure themselves
        extra = entry.extra
        if isinstance(extra, dict) and extra:
            backend.follow_record(extra)
    # Say why this takes time: a JIT build's compiled code cannot be stored (torch 2.11 cannot save
    # a frozen build), so every process compiles it again, from torch's caches where they hold it.
    logger.info(
        "🔁 %s: building %s again from the module (a JIT or eager backend's compiled code is not stored; "
        "see docs/reference/configuration.md#compiler-caches)",
        where,
        backend.describe(),
    )
    start = time.perf_counter()
    backend.build(module, graph, graph.samples, device, _rebuild_dir(module_name, graph.name, cls, config))
    logger.info("🔁 %s: %s built again in %.1f s", where, backend.describe(), time.perf_counter() - start)
    return backend


def _rebuild_dir(module_name: str, graph_name: str, cls: type, config: BackendConfig | None) -> Path:
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
