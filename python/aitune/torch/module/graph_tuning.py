"""Tuning one module's recorded graphs: results store first, then the strategy
(docs/reference/tuning.md#reusing-results). Shared by ait.Module.tune (declarative) and PatchedModule (JIT,
docs/reference/jit.md), which differ only in where builds and stored results live."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from aitune.exceptions import DiskSpaceError, NoValidBackendError
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.backend.common.compile_caches import keep_compile_caches_in_aitune
from aitune.torch.backend.backend import Backend
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.graph.signature import Params
from aitune.torch.results import ResultsStore
from aitune.torch.tune_data import recorder as tune_data
from aitune.torch.tune_strategy.tune_strategy import TuneStrategy

logger = logging.getLogger("aitune")


def tune_graphs(
    module: torch.nn.Module,
    name: str,
    graphs: list[GraphSpec],
    strategies: list[TuneStrategy | None],
    device: torch.device,
    fallback_policy: str,
    forward_params: Params,
    *,
    build_root: Path,
    results_root: Path | None,
    dry_run: bool = False,
    model_fingerprint: dict | None = None,
    remember_no_backend: bool = False,
) -> list:
    """Returns [(graph, backend)] in graph order; with `dry_run` logs each graph and returns [].
    `build_root/<graph>` holds the builds; `results_root` None disables results reuse.
    `model_fingerprint`, when the caller already computed it, spares a second pass over the weights.
    `remember_no_backend` (JIT mode) also stores a NoValidBackendError outcome under the same key
    and raises it again from the store, so a process that starts again does not rebuild every
    candidate to learn that none beats eager."""
    if not dry_run:
        # Before anything imports torch's compiler caches (some fix their folder at import).
        keep_compile_caches_in_aitune()
    store = None
    # docs/reference/tuning.md#reusing-results: dry_run neither reads nor writes
    if results_root is not None and not dry_run:
        store = ResultsStore(
            module,
            name,
            forward_params,
            device,
            fallback_policy,
            root=results_root,
            model_fingerprint=model_fingerprint,
        )
    selected = []
    kept_eager: list[tuple[GraphSpec, NoValidBackendError]] = []
    for graph, graph_strategy in zip(graphs, strategies):
        cache_dir = Path(build_root) / graph.name
        if graph_strategy is not None:
            graph_strategy.prepare(device)  # before the key: default candidates depend on the device
        if dry_run:
            if graph_strategy is not None:
                graph_strategy.tune_dry_run(module, name, graph, graph.samples, device, cache_dir)
            else:
                logger.info(
                    "🚀 Tuning graph `%s` for module `%s` (DRY RUN):\n%s", graph.display_name, name, graph.describe()
                )
            continue
        key = store.key(graph, graph_strategy) if store is not None else None  # before the strategy runs
        if key is not None and remember_no_backend:
            reason = store.lookup_no_backend(key)
            if reason is not None:
                path = store.outcome_path(key)
                logger.info(
                    "♻️ Reusing tuning outcome for module `%s` graph `%s`: no backend qualified (%s)",
                    name,
                    graph.display_name,
                    path,
                )
                error = NoValidBackendError(f"{reason} [stored outcome {path}; delete it to tune again]")
                if len(graphs) == 1:
                    raise error
                kept_eager.append((graph, error))
                continue
        backend = store.lookup(key, graph, graph_strategy) if key is not None else None
        if backend is not None:
            _record_reuse(graph_strategy, name, graph, device, cache_dir, backend, store.path(key))
        else:
            try:
                backend = graph_strategy.tune(module, name, graph, graph.samples, device, cache_dir)
            except NoValidBackendError as e:
                if key is not None and remember_no_backend:
                    store.write_no_backend(key, graph, _reason_with_outcomes(e, graph_strategy))
                if e.outcome is None or len(graphs) == 1:
                    raise
                kept_eager.append((graph, e))
                continue
            if key is not None:
                store.write(key, graph, backend)
        selected.append((graph, backend))
    if kept_eager:
        if not selected:  # every graph kept eager: the module passes through to the original
            raise kept_eager[0][1]
        selected = _serve_kept_graphs_eagerly(module, name, selected, kept_eager, device, build_root, graphs)
    return selected


def _serve_kept_graphs_eagerly(
    module: torch.nn.Module,
    name: str,
    selected: list,
    kept: list,
    device: torch.device,
    build_root: Path,
    graphs: list[GraphSpec],
) -> list:
    """Some graphs were tuned and others kept eager: the tuned ones keep their backends and the
    kept ones are served by the original module (TorchEagerBackend), in graph order."""
    by_graph = {id(graph): backend for graph, backend in selected}
    for graph, _ in kept:
        backend = TorchEagerBackend()
        backend.build(module, graph, graph.samples, device, Path(build_root) / graph.name / "kept_eager")
        by_graph[id(graph)] = backend
        logger.info(
            "🟰 %s.%s: served by the original module (TorchEagerBackend); the module's other graphs keep "
            "their tuned backends",
            name,
            graph.name,
        )
    return [(graph, by_graph[id(graph)]) for graph in graphs if id(graph) in by_graph]


def _reason_with_outcomes(error: NoValidBackendError, strategy: TuneStrategy) -> str:
    """The error with why each candidate lost, as the JIT exit diagnostics show it."""
    outcomes = [
        f"{r.get('backend')}: {r.get('error') or r.get('skipped') or 'not faster than eager'}"
        for r in getattr(strategy, "backend_results", [])
    ]
    return f"{error.message} ({'; '.join(outcomes)})" if outcomes else error.message


def _record_reuse(
    strategy: TuneStrategy,
    name: str,
    graph: GraphSpec,
    device: torch.device,
    cache_dir: Path,
    backend: Backend,
    path: Path,
) -> None:
    """A graph served from the results store still appears in the telemetry, with no builds and
    the stored file as its selection rule, so a report shows why nothing was built."""
    try:
        with tune_data.graph_span(strategy, name, graph, len(graph.samples), device, cache_dir) as report:
            report.selection_rule = f"reused stored tuning result {path}"
            report.outcome = "reused"
            tune_data.record_selection(backend)
    except DiskSpaceError:
        raise
    except Exception as e:  # noqa: BLE001 - telemetry is best effort
        logger.debug("Could not record the reuse of module `%s` graph `%s`: %s", name, graph.name, e)
