"""find-max-batch-size (docs/guide.md, "Tuning", step 1): an eager backend swept over the
profiling batch sizes; the best-throughput batch size extends the graph's max shapes, which
size the profiles, the checks at the max shape and the profiling strategies' sweep.

The sweep stops at the first of: the throughput plateau, out of memory, an error, the last batch
size, or the time budget `config.max_batch_search_s` (20 s by default). Without the budget a
ResNet-50 swept up to batch 2048 for two minutes to learn a max that a batch-1 user never needs;
the log line says which limit stopped it."""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Callable

from aitune.torch.backend.common.serving import graph_dispatcher
from aitune.torch.config import config
from aitune.torch.logging_utils import captured_output
from aitune.torch.task.batching import extend_max_batch
from aitune.torch.task.sweep import SweepLimits, best_throughput, profile
from aitune.torch.task.profiling.config import ProfilingConfig
from aitune.torch.tune_data import recorder as tune_data

if TYPE_CHECKING:
    from aitune.torch.backend.backend import Backend
    from aitune.torch.tune_strategy.context import GraphContext


def search_max_batch_size(
    backend: Backend,
    ctx: GraphContext,
    profiling_config: ProfilingConfig,
    log: Callable[..., None],
    limits: SweepLimits | None = None,
) -> int:
    """Runs the search for the graph of `ctx` (a GraphContext) with the eager `backend`; returns
    the batch size found. `limits` defaults to the configured time budget. A failure writes
    `error.log` in the search folder and propagates (the graph fails,
    docs/reference/strategies.md#per-graph-pipeline)."""
    folder = ctx.cache_dir / "find_max_batch_size"
    limits = limits or SweepLimits(time_budget_s=config.max_batch_search_s)
    log(
        "🚀 Finding max batch size for module `%s` graph `%s` (time budget %s)",
        ctx.module_name,
        ctx.graph.display_name,
        "none" if limits.time_budget_s is None else f"{limits.time_budget_s:g} s",
    )
    try:
        with captured_output(folder / "build.log"):
            backend.build(ctx.module, ctx.graph, ctx.data, ctx.device, folder)
        try:
            results = profile(
                graph_dispatcher(ctx.graph, backend, ctx.module_name),
                ctx.graph,
                ctx.data,
                profiling_config,
                ctx.device,
                list(profiling_config.batch_sizes),
                label="the max batch size (eager)",
                limits=limits,
            )
        finally:
            backend.deactivate()
        tune_data.record_measurements(results, kind="max_batch_search")
        tune_data.record_max_batch_search(limits.stopped_by, limits.elapsed_s)
        best = best_throughput(results)
        if best is None:
            raise RuntimeError("no batch size could be measured")
        extend_max_batch(ctx.graph, ctx.data[0], best["batch_size"])
        log(
            "✅ Max batch size for module `%s` graph `%s` is %d with throughput %.2f samples/s "
            "(search stopped by %s, after %.1f s)",
            ctx.module_name,
            ctx.graph.display_name,
            best["batch_size"],
            best["throughput_per_s"],
            limits.stopped_by,
            limits.elapsed_s,
        )
        return int(best["batch_size"])
    except Exception as e:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "error.log").write_text("".join(traceback.format_exception(e)))
        raise
