"""Tuning one patched module (docs/reference/jit.md "Tuning"): the JIT strategy over its recorded graphs
through the same per-graph path as ait.Module.tune (results store, then the strategy), with the
builds under `jit_config.cache_dir/<qualified name>-<model fingerprint[:10]>/<graph>` and the
stored results under `jit_config.cache_dir/results/`. A failure (or nothing faster than eager)
leaves the module EAGER and its children are tried next; DiskSpaceError propagates."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from aitune.exceptions import DiskSpaceError, GraphBreakException, NoValidBackendError
from aitune.torch.config import config, normalize_device
from aitune.torch.jit import telemetry
from aitune.torch.jit.config import JITMode
from aitune.torch.jit.config import config as jit_config
from aitune.torch.jit.state import JITModuleState, Patched, get_patched, runtime, suspended
from aitune.torch.logging_utils import format_duration, setup_logging
from aitune.torch.module.graph_tuning import tune_graphs
from aitune.torch.results.store import model_fingerprint
from aitune.utils.json_types import JSONDict

if TYPE_CHECKING:
    from aitune.torch.tune_strategy.tune_strategy import TuneStrategy

logger = logging.getLogger("aitune")


def jit_strategy() -> TuneStrategy:
    """`jit_config.resolve_strategy().clone()` with the max-batch search off (JIT graphs have no
    batch axis: the batch size of a call is unknown)."""
    return jit_config.resolve_strategy().clone().enable_find_max_batch_size(False)


def _tuning_device(patched: Patched) -> torch.device:
    if jit_config.device is None:
        return patched.device
    device = torch.device(normalize_device(jit_config.device))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"jit_config.device is {jit_config.device!r} but CUDA is not available; set "
            "jit_config.device = None to tune on the module's own device, or 'cpu'"
        )
    return device


def _submodules(patched: Patched) -> list[Patched]:
    found = []
    for sub in patched.module.modules():
        if sub is not patched.module:
            p = get_patched(sub)
            if p is not None:
                found.append(p)
    return found


def _build_root(patched: Patched, fingerprint: JSONDict) -> Path:
    cls = type(patched.module)
    qualified = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{cls.__module__}.{cls.__qualname__}")
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()
    return Path(jit_config.cache_dir) / f"{qualified}-{digest[:10]}"


def tune_patched(patched: Patched) -> None:
    """RECORDING → TUNED, or → EAGER followed by its children."""
    setup_logging()
    jit_config.validate()
    subs = _submodules(patched)
    with suspended(), torch.no_grad():
        for sub in subs:  # builds trace the original forwards, never a router
            sub.unroute()
        ok = False
        try:
            ok = _tune(patched)  # DiskSpaceError (and interrupts) propagate, with the routers restored
        finally:
            if not ok:
                for sub in subs:
                    sub.route()
    if ok:
        for sub in subs:
            sub.detach(f"ancestor `{patched.name}` was tuned")
        return
    for child in patched.children:  # hierarchy fallback (docs/reference/jit.md EAGER)
        if child.state is JITModuleState.RECORDING and child.recorder is not None and child.recorder.graphs:
            if jit_config.mode is not JITMode.TUNE_EAGER or child.eager_trigger_ready():
                tune_patched(child)


def _tune(patched: Patched) -> bool:
    name = patched.name
    start = time.perf_counter()
    logger.info(
        "🎯 JIT: tuning module `%s` (%s, %d recorded call(s))", name, type(patched.module).__name__, patched.num_calls
    )
    runtime.event(name, "tuning started")
    try:
        if jit_config.detect_graph_breaks:
            _probe_graph_breaks(patched)
        if jit_config.dry_run:
            return _dry_run(patched)
        _tune_graphs(patched)
    except DiskSpaceError:
        raise
    except NoValidBackendError as e:  # nothing beat eager: not an error (the strategy said why)
        patched.state = JITModuleState.EAGER
        patched.reason = f"kept eager: {e}"
        runtime.event(name, patched.reason)
        logger.info("🟰 JIT: module `%s` kept eager; its children are tried next", name)
        return False
    except Exception as e:  # noqa: BLE001 - any other failure: eager, children next
        patched.state = JITModuleState.EAGER
        patched.reason = f"{type(e).__name__}: {e}"
        runtime.event(name, f"eager: {patched.reason}")
        logger.warning("⚠️ JIT: tuning module `%s` failed, it runs eagerly: %s", name, patched.reason)
        return False
    runtime.event(name, "tuned: " + ", ".join(b.describe() for _, b in patched.tuned.backends))
    logger.info("✅ JIT: module `%s` tuned in %s", name, format_duration(time.perf_counter() - start))
    return True


def _tune_graphs(patched: Patched) -> None:
    module, name, recorder = patched.module, patched.name, patched.recorder
    device = _tuning_device(patched)
    strategy = jit_strategy()
    graphs = recorder.graphs
    policy = config.fallback_policy
    fingerprint = model_fingerprint(module, recorder.params)
    results_root = Path(jit_config.cache_dir) / "results" if config.reuse_tuning_results else None
    strategies = [strategy.clone() for _ in graphs]
    try:
        with telemetry.jit_module_span(name):
            selected = tune_graphs(
                module,
                name,
                graphs,
                strategies,
                device,
                policy,
                recorder.params,
                build_root=_build_root(patched, fingerprint),
                results_root=results_root,
                model_fingerprint=fingerprint,
                remember_no_backend=True,
            )
    except NoValidBackendError as e:  # say why each candidate lost, for the exit diagnostics
        outcomes = [
            f"{r.get('backend')}: {r.get('error') or r.get('skipped') or 'not faster than eager'}"
            for s in strategies
            for r in s.backend_results
        ]
        raise NoValidBackendError(f"{e.message} ({'; '.join(outcomes)})" if outcomes else e.message) from e
    patched.mark_tuned(selected, device, policy)


def _dry_run(patched: Patched) -> bool:
    """Logs the graphs and strategy; fails at random with dry_run_failure_probability, so the
    fallback to children can be rehearsed without building anything."""
    strategy = jit_strategy()
    graphs = patched.recorder.graphs
    tune_graphs(
        patched.module,
        patched.name,
        graphs,
        [strategy] * len(graphs),
        patched.device,
        "eager",
        patched.recorder.params,
        build_root=Path(jit_config.cache_dir) / "dry_run",
        results_root=None,
        dry_run=True,
    )
    if random.random() < jit_config.dry_run_failure_probability:
        raise RuntimeError(
            f"simulated failure (dry run, dry_run_failure_probability={jit_config.dry_run_failure_probability})"
        )
    patched.mark_dry_tuned()
    return True


def _probe_graph_breaks(patched: Patched) -> None:
    """torch.compile(fullgraph=True) with dynamo's capture-only backend on the first sample: a
    graph break raises here, so the module falls back to its children, which may compile whole."""
    graph = patched.recorder.graphs[0]
    sample = graph.samples[0]
    compiled = torch.compile(patched.original_forward, fullgraph=True, backend="eager")
    try:
        with torch.no_grad():
            compiled(*sample.args, **sample.kwargs)
    except Exception as e:
        raise GraphBreakException(
            f"graph break detected by torch.compile(fullgraph=True): {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}"
        ) from e
