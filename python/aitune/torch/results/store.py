"""The results store (docs/reference/tuning.md#reusing-results): before a graph is tuned, a key is computed as SHA-256
over the model, graph spec, config and environment fingerprints and the aitune version; a hit loads the
single-graph checkpoint `config.cache_dir/results/<module>/<key>.ait` instead of tuning, a miss
tunes and writes it (atomically: the archive writer renames a temporary file at the end).

Store files reuse the checkpoint format (docs/reference/checkpoint.md) with one module and one graph. They hold the
manifest and the backend's artifacts only: no weights (the key pins them to the live module's)
and no samples (the live graph's samples serve JIT and eager rebuilds). Nothing is evicted.

Tensor content digest: a 64-bit digest computed with torch on the tensor's own device (no host
copy of GPU weights): the tensor's bytes, read as 32-bit words where the size allows (bytes
otherwise), are multiplied by position-dependent odd 64-bit multipliers and summed with
wrap-around in two independent lanes, which blake2b then folds to 64 bits. Unlike a plain sum,
every single-word change and every permutation of words changes it; it is not cryptographic.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
from pathlib import Path

import torch

import aitune
from aitune._native import _C
from aitune.exceptions import IncompatibleCheckpointError
from aitune.torch.checkpoint.fingerprint import current_fingerprint, mismatches
from aitune.torch.checkpoint.entry_writer import backend_entry
from aitune.torch.checkpoint.format import (
    FORMAT,
    OpenedCheckpoint,
    manifest_format_version,
    resolve_backend,
    shown_name,
)
from aitune.torch.checkpoint.graphs import graph_from_native, graph_to_json
from aitune.torch.checkpoint.restore import restore_backend
from aitune.torch.checkpoint.storage import abandoned_on_error
from aitune.torch.config import config
from aitune.torch.backend.backend import Backend
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.graph.signature import KIND_NAMES, Params
from aitune.torch.task.numeric import reference_outputs
from aitune.torch.tune_strategy.tune_strategy import TuneStrategy
from aitune.torch.utils.fs import atomic_write_text
from aitune.utils.json_types import JSON, JSONDict

logger = logging.getLogger("aitune")

STORE_KIND = _C.MANIFEST_RESULTS_KIND  # cpp/core/checkpoint/manifest_schema.h
_M1 = -7046029254386353131  # 0x9E3779B97F4A7C15 as int64
_M2 = -4658895280553007687  # 0xBF58476D1CE4E5B9 as int64
_M3 = -7723592293110705685  # 0x94D049BB133111EB as int64
_CHUNK = 1 << 24  # words per step, bounds the temporary memory


def tensor_digest(tensor: torch.Tensor) -> str:
    """64-bit content digest (16 hex digits) computed on the tensor's own device."""
    t = tensor.detach()
    if t.device.type == "meta":
        raise ValueError("a tensor on the meta device has no content to fingerprint")
    if t.is_sparse or t.layout != torch.strided:
        t = t.to_dense()
    t = t.contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    raw = t.view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8, device=t.device)
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
    h1 = torch.zeros((), dtype=torch.int64, device=t.device)
    h2 = torch.zeros((), dtype=torch.int64, device=t.device)
    for start in range(0, words.numel(), _CHUNK):
        w = words[start : start + _CHUNK].to(torch.int64)
        idx = torch.arange(start, start + w.numel(), dtype=torch.int64, device=t.device)
        m = idx * _M1
        m = (m ^ (m >> 29)) * _M2
        h1 += (w * (m | 1)).sum()
        h2 += ((w ^ (m >> 31)) * _M3 + m).sum()
    lanes = f"{int(h1.item())}:{int(h2.item())}:{words.numel()}:{words.dtype}"
    return hashlib.blake2b(lanes.encode(), digest_size=8).hexdigest()


def model_fingerprint(module: torch.nn.Module, forward_params: Params) -> JSONDict:
    """Class qualified name, forward signature, and every parameter and buffer (docs/reference/tuning.md#reusing-results
    (1))."""
    tensors = []
    for kind, items in (("parameter", module.named_parameters()), ("buffer", module.named_buffers())):
        for name, t in items:
            tensors.append([kind, name, list(t.shape), str(t.dtype), tensor_digest(t)])
    cls = type(module)
    return {
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "forward_signature": _jsonable(forward_params),
        "tensors": tensors,
    }


def _jsonable(value: object) -> JSON:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(str(_jsonable(v)) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "dataclass": type(value).__qualname__,
            **{f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if hasattr(value, "to_json_dict"):
        return _jsonable(value.to_json_dict())
    return f"{type(value).__module__}.{type(value).__qualname__}"  # never a repr with an address


def config_fingerprint(
    strategy: TuneStrategy, device: torch.device, fallback_policy: str, graph: GraphSpec
) -> JSONDict:
    """Strategy class and to_json_dict(), its switches, each backend's key() and tolerance,
    strict_mode, max_num_samples_stored, fallback policy, batch sizes and device
    (docs/reference/tuning.md#reusing-results (3))."""
    switches = {k: _jsonable(v) for k, v in strategy.settings().items()}
    cls = type(strategy)
    max_stored = config.max_num_samples_stored
    return {
        "strategy": f"{cls.__module__}.{cls.__qualname__}",
        "strategy_config": _jsonable(strategy.to_json_dict()),
        "switches": switches,
        "tolerance": _jsonable(strategy.tolerance),
        "backends": [{"key": b.key(), "tolerance": _jsonable(b.tolerance)} for b in strategy.configured_backends()],
        "strict_mode": bool(config.strict_mode),
        "max_num_samples_stored": "inf" if isinstance(max_stored, float) else max_stored,
        "fallback_policy": fallback_policy,
        "batch_sizes": sorted(
            set(getattr(graph, "observed_batch_sizes", ()) or ()) | {s.batch_size or 0 for s in graph.samples}
        ),
        "device": str(device),
        # A result tuned under a budget may be what the budget allowed, not the best.
        **({"tuning_budget_s": config.tuning_budget_s} if config.tuning_budget_s is not None else {}),
    }


class ResultsStore:
    """Results of one module's graphs under `<root>/<module>/<key>.ait`."""

    def __init__(
        self,
        module: torch.nn.Module,
        module_name: str,
        forward_params: Params,
        device: torch.device,
        fallback_policy: str,
        root: Path | None = None,
        model_fingerprint: JSONDict | None = None,
    ) -> None:
        """`model_fingerprint`, when the caller already computed it, spares a second pass over
        the weights."""
        self.module = module
        self.module_name = module_name
        self.device = torch.device(device)
        self.fallback_policy = fallback_policy
        self.forward_params = forward_params
        self.folder = Path(root or Path(config.cache_dir) / "results") / module_name
        self._model_fp: JSONDict | None = model_fingerprint

    # -- key --------------------------------------------------------------------------------
    def key(self, graph: GraphSpec, strategy: TuneStrategy) -> str | None:
        """The graph's key, computed before any strategy modifies the graph; None when the
        model or the strategy cannot be fingerprinted (the graph is then tuned, not stored)."""
        try:
            if self._model_fp is None:
                self._model_fp = model_fingerprint(self.module, self.forward_params)
            payload = {
                "model": self._model_fp,
                "graph": graph_to_json(graph),
                "config": config_fingerprint(strategy, self.device, self.fallback_policy, graph),
                "environment": current_fingerprint(self.device),
                "aitune_version": aitune.__version__,
            }
            text = json.dumps(payload, sort_keys=True, default=str)
        except Exception as e:  # noqa: BLE001 - reuse is an optimisation, tuning still happens
            logger.debug("Tuning results of module `%s` graph `%s` are not reused: %s", self.module_name, graph.name, e)
            return None
        return hashlib.sha256(text.encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.ait"

    def outcome_path(self, key: str) -> Path:
        """Where a graph's "no backend qualified" outcome is remembered (JIT mode)."""
        return self.folder / f"{key}.no_backend.json"

    # -- "no backend qualified" outcomes (JIT mode) ------------------------------------------
    def lookup_no_backend(self, key: str) -> str | None:
        """The stored reason why no backend qualified for this key, or None. Same key as a
        result: any change of model, graph, config, environment or aitune version misses."""
        path = self.outcome_path(key)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            logger.warning("⚠️ Stored tuning outcome %s cannot be read (%s); tuning again", path, e)
            return None
        if data.get("results_key") != key or not isinstance(data.get("reason"), str):
            return None
        return data["reason"]

    def write_no_backend(self, key: str, graph: GraphSpec, reason: str) -> Path | None:
        """Remembers that no backend qualified (so the next process does not build them all again
        to learn the same); a failure only logs a warning."""
        path = self.outcome_path(key)
        record = {
            "results_key": key,
            "module": self.module_name,
            "graph": graph.name,
            "reason": reason,
            "aitune_version": aitune.__version__,
            "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        try:
            atomic_write_text(path, json.dumps(record, indent=1))
        except OSError as e:
            logger.warning(
                "⚠️ The tuning outcome of module `%s` graph `%s` could not be stored in %s (%s)",
                self.module_name,
                graph.display_name,
                path,
                e,
            )
            return None
        return path

    # -- read -------------------------------------------------------------------------------
    def lookup(self, key: str, graph: GraphSpec, strategy: TuneStrategy | None = None) -> Backend | None:
        """The stored backend for `graph`, active on the store's device, or None (a miss or an
        unusable file: then a warning, and the caller tunes and overwrites it). On a hit the
        live graph takes the stored input/output specs (e.g. widened by a max-batch search)."""
        path = self.path(key)
        if not path.exists():
            return None
        try:
            backend, stored_graph, created = self._restore(path, key, graph, strategy)
        except Exception as e:  # noqa: BLE001
            logger.warning(
                "⚠️ Stored tuning result %s for module `%s` graph `%s` cannot be reused (%s: %s); tuning it again",
                path,
                self.module_name,
                graph.display_name,
                type(e).__name__,
                e,
            )
            return None
        graph.input_spec = stored_graph.input_spec
        graph.output_spec = stored_graph.output_spec
        graph.reference_outputs = stored_graph.reference_outputs
        logger.info(
            "♻️ Reusing tuning result for module `%s` graph `%s` (%s, tuned %s)",
            self.module_name,
            graph.display_name,
            backend.describe(),
            created,
        )
        return backend

    def _restore(
        self, path: Path, key: str, graph: GraphSpec, strategy: TuneStrategy | None
    ) -> tuple[Backend, GraphSpec, str]:
        ckpt = OpenedCheckpoint(path, "fast")
        manifest = ckpt.manifest
        if manifest.results_key != key:
            raise ValueError(f"the file holds the result of key {manifest.results_key!r}")
        g = manifest.modules[0].graphs[0]
        b = g.backend
        problems = mismatches(
            manifest.fingerprint,
            current_fingerprint(self.device),
            b.requires,
            f"{shown_name(b).rsplit('.', 1)[-1]} of module '{self.module_name}' graph '{g.name}'",
        )
        if problems:
            raise IncompatibleCheckpointError(problems)
        cls = resolve_backend(b)
        stored = graph_from_native(g, graph.forward_params, graph.dynamic_shapes)
        stored.samples = graph.samples
        artifacts_root = ckpt.extract_all() if b.artifacts else None
        self.module.to(self.device)  # as a strategy does: JIT and eager backends serve the module
        if graph.samples and (strategy is None or strategy.checks_numerics):
            # The eager outputs a strategy records for checkpoints (`aitune run --check`).
            raw: list[object] = []
            reference_outputs(getattr(self.module, "_aitune_original_forward", self.module.forward), graph.samples, raw)
            stored.reference_outputs = raw
        backend = restore_backend(
            cls, b, self.module, stored, self.device, artifacts_root, retune=False, module_name=self.module_name
        )
        return backend, stored, manifest.created_at

    # -- write ------------------------------------------------------------------------------
    def write(self, key: str, graph: GraphSpec, backend: Backend) -> Path | None:
        """Writes the tuned graph's result; a failure only logs a warning."""
        try:
            return self._write(key, graph, backend)
        except Exception as e:  # noqa: BLE001
            logger.warning(
                "⚠️ The tuning result of module `%s` graph `%s` could not be stored in %s (%s: %s)",
                self.module_name,
                graph.display_name,
                self.folder,
                type(e).__name__,
                e,
            )
            return None

    def _write(self, key: str, graph: GraphSpec, backend: Backend) -> Path:
        version = manifest_format_version()
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        writer = _C.ArchiveWriter(str(target))  # temporary file, renamed over `target` by finish()
        # An error or Ctrl-C half-way removes the temporary file at once: the store never holds a
        # partial file, and no leftover waits for the traceback to be freed.
        with abandoned_on_error(writer):
            entry = graph_to_json(graph)
            entry["backend"] = backend_entry(backend, writer, f"modules/0/graphs/{graph.name}", version)
            entry["samples"] = []
            cls = type(self.module)
            module_entry = {
                "name": self.module_name,
                "prefix": "",
                "class": f"{cls.__module__}.{cls.__qualname__}",
                "strict_mode": bool(config.strict_mode),
                "fallback_policy": self.fallback_policy,
                "weights": None,
                "forward_signature": _signature(self.forward_params),
                "dynamic_shapes": None,
                "graphs": [entry],
            }
            manifest = {
                "format": FORMAT,
                "format_version": version,
                "kind": STORE_KIND,
                "results_key": key,
                "aitune_version": aitune.__version__,
                "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "fingerprint": current_fingerprint(backend.device or self.device),
                "config": {"device_after_tuning": config.device_after_tuning},
                "root": {"kind": "module", "class": module_entry["class"], "weights": None},
                "modules": [module_entry],
                "files": writer.files(),
            }
            writer.finish(json.dumps(manifest, indent=1))
        logger.debug("Tuning result of module `%s` graph `%s` stored in %s", self.module_name, graph.name, target)
        return target


def _signature(params: Params) -> list[JSONDict]:
    try:
        return [{"name": n, "kind": KIND_NAMES[k], "has_default": d} for n, k, d in params]
    except Exception:  # noqa: BLE001
        return []
