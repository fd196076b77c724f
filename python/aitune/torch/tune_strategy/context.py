"""What one graph's tuning works with, and the strategy contract that code outside a strategy may
use (docs/design.md#the-strategy-contract).

`GraphContext` carries the graph, its samples and where to build; `ctx.executor` is where the
candidates are evaluated: None means here, one after another; under ait.tune(devices=[...]) it is
the device pool (multi_device/pool.py), which ait.tune installs for the call (`installed`). The
pool depends only on `RecordingStrategy`, the part of TuneStrategy declared for it, so the strategy
package never imports the pool."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Callable, Iterator, Mapping, Protocol, Sequence

import torch

from aitune.torch.backend.backend import Backend
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.task.numeric import ReferenceLeaf
from aitune.torch.tune_strategy.budget import TuningBudget
from aitune.torch.tune_strategy.records import CandidateRecord


@dataclasses.dataclass(frozen=True)
class Baseline:
    """The eager baseline a strategy measured on its device: the device pool compares devices by it.
    `scales_records`: the strategy compares candidates' numbers across devices (profiling
    strategies), so each record is scaled by its device's ratio; otherwise (the gate) each
    candidate was judged against its own device's baseline."""

    throughput_per_s: float
    latency_ms: float | None = None
    scales_records: bool = False


class RecordingStrategy(Protocol):
    """What an executor uses of a strategy (TuneStrategy implements it). In a worker process, per
    graph: start_graph, baseline, evaluate (one call per group of serving siblings), end_graph; in the
    tuning process: candidates and settled while the records come in."""

    def candidates(self) -> list[Backend]: ...

    def start_graph(self, ctx: GraphContext) -> None: ...

    def baseline(self) -> Baseline | None: ...

    def evaluate(self, indices: Sequence[int], ctx: GraphContext) -> list[CandidateRecord]: ...

    def settled(self, records: Mapping[int, CandidateRecord]) -> bool: ...

    def end_graph(self) -> None: ...


class CandidateExecutor(Protocol):
    """Evaluates every candidate of `strategy` for the graph of `ctx` elsewhere and returns one
    record per candidate in candidate order, or None when it cannot (the strategy then tunes the
    graph here, one candidate after another)."""

    def evaluate(self, strategy: RecordingStrategy, ctx: GraphContext) -> list[CandidateRecord] | None: ...


@dataclasses.dataclass
class GraphContext:
    """Everything one graph's tuning works with."""

    module: torch.nn.Module
    module_name: str
    graph: GraphSpec
    data: list[Sample]
    device: torch.device
    cache_dir: Path
    refs: list[list[ReferenceLeaf]] | None = None
    # The batch sizes the caller tuned with that reached this graph (ait.tune's batch_sizes), in
    # ascending order; empty when unknown (JIT mode, where a call's batch size is not known).
    batch_sizes: list[int] = dataclasses.field(default_factory=list)
    executor: CandidateExecutor | None = None
    budget: TuningBudget | None = None  # the tuning budget, for the strategies that walk candidates

    @property
    def forward(self) -> Callable:
        return getattr(self.module, "_aitune_original_forward", self.module.forward)


_INSTALLED: list[CandidateExecutor] = []


@contextlib.contextmanager
def installed(executor: CandidateExecutor | None) -> Iterator[None]:
    """Graphs tuned inside the block get `executor` as their ctx.executor (None: nothing changes)."""
    if executor is None:
        yield
        return
    _INSTALLED.append(executor)
    try:
        yield
    finally:
        _INSTALLED.remove(executor)


def installed_executor() -> CandidateExecutor | None:
    return _INSTALLED[-1] if _INSTALLED else None
