from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from aitune.exceptions import CudaGraphCaptureError, NoValidBackendError
from aitune.torch.backend.backend import Backend
from aitune.torch.tune_data import recorder as tune_data
from aitune.torch.tune_strategy.default_backends import first_wins_defaults
from aitune.torch.tune_strategy.performance_validation import PerformanceValidatedStrategy
from aitune.torch.tune_strategy.records import CandidateRecord
from aitune.torch.tune_strategy.remote_builds import materialize, replay
from aitune.torch.tune_strategy.tune_strategy import GraphContext, checked_budget_s

if TYPE_CHECKING:
    import logging

    import torch

    from aitune.torch.task.profiling.config import ProfilingConfig


class FirstWinsStrategy(PerformanceValidatedStrategy):
    """The first candidate that is available, builds, is correct and passes the gate
    (docs/guide.md, "Strategies"). Eager is never returned: when nothing qualifies the strategy
    logs the plain kept-eager line and raises NoValidBackendError carrying that outcome, and
    ait.tune serves the original module.

    `backends=None` means the default list for the tuning device: on CUDA it leads with
    CUDA-graph variants (default_backends.py). `budget_s` (seconds) bounds the tuning as
    config.tuning_budget_s does and wins over it; the candidates keep their order
    (docs/reference/strategies.md#tuning-budget)."""

    _walks_candidates = True

    def __init__(
        self,
        backends: list[Backend] | None = None,
        *,
        sink: logging.Logger | None = None,
        profiling_config: ProfilingConfig | None = None,
        min_speedup_threshold_percent: float = 1.0,
        budget_s: float | None = None,
    ) -> None:
        super().__init__(
            sink=sink, profiling_config=profiling_config, min_speedup_threshold_percent=min_speedup_threshold_percent
        )
        self.budget_s = checked_budget_s(budget_s)
        self._default_backends = backends is None
        self.backends = list(backends) if backends is not None else first_wins_defaults()
        for b in self.backends:
            if not isinstance(b, Backend):
                raise TypeError(f"FirstWinsStrategy backends must be Backend instances, got {type(b).__name__}")

    def prepare(self, device: torch.device | str | None) -> FirstWinsStrategy:
        if self._default_backends:
            self.backends = first_wins_defaults(device)
        return self

    def selection_rule(self) -> str:
        return f"{type(self).__name__}: the first backend (in order) that builds, passes the checks{self._gate_rule_text()}"

    def _describe_parts(self) -> list[str]:  # AITune's form (docs/guide.md, "Coming from AITune")
        return [
            "name: First Wins Strategy",
            "description: evaluate backends in order, return first working backend",
            "backends:",
            *[f"  {b.describe()}" for b in self.backends],
            *([f"budget_s: {self.budget_s:g}"] if self.budget_s is not None else []),
        ]

    def to_json_dict(self) -> dict[str, object]:
        data = {
            "backends": [b.describe() for b in self.backends],
            "min_speedup_threshold_percent": self.min_speedup_threshold_percent,
            "profiling_config": self.profiling_config.to_json_dict(),
        }
        return {**data, "budget_s": self.budget_s} if self.budget_s is not None else data

    def _tune(self, ctx: GraphContext) -> Backend:
        for blueprint in self.backends:
            backend = self._build_and_validate(blueprint, ctx, raise_on_failure=False)
            if backend is None:
                continue
            if self._measured_within_budget(backend, ctx, lambda: self._measure_candidate(backend, ctx)):
                return self._selected(backend, ctx)
            self._siblings.before_release(backend)
            # gate-rejected candidates free their memory at once (docs/reference/strategies.md#per-graph-pipeline)
            backend.deactivate()
            ctx.module.to(ctx.device)
        return self._none_qualified(ctx)

    def _measure_candidate(self, backend: Backend, ctx: GraphContext) -> bool:
        """The gate for a built, validated candidate (also what a multi-device worker runs)."""
        try:
            return self._passes_gate(backend, ctx)
        except CudaGraphCaptureError as e:  # a capture failed while measuring: its plain sibling may run
            self._log("❌ backend failed: %s", e)
            self._tally.record_failure(None)
            tune_data.fail_build(e, backend.describe())
            return False

    def _selected(self, backend: Backend, ctx: GraphContext) -> Backend:
        self._log(
            "✅ Selected %s for module %s and graph spec %s.",
            backend.describe(),
            ctx.module_name,
            ctx.graph.display_name,
        )
        return backend

    def _none_qualified(self, ctx: GraphContext) -> Backend:
        self._keep_eager_message(ctx)
        raise NoValidBackendError(
            f"There is no valid backend for a module: {ctx.module_name}, graph_spec: {ctx.graph.display_name}",
            outcome=self._kept_eager,
        )

    # -- several devices (docs/guide.md, "Tuning on several GPUs") -----------------------------
    def settled(self, records: Mapping[int, CandidateRecord]) -> bool:
        """The decision is known once every candidate before the first passing one is in."""
        for index in range(len(self.backends)):
            if index not in records:
                return False
            if records[index].passed:
                return True
        return True

    def decide(self, ctx: GraphContext, records: list[CandidateRecord]) -> Backend:
        """The sequential rule on the workers' records: candidates in list order, the first that
        passed its gate (measured against its own device's eager baseline) wins. Its build is
        then served on the tuning device; if that fails, the next one that passed wins."""
        for record in records:
            replay(self, record)
            if not record.passed:
                continue
            backend = materialize(self, record, ctx)
            if backend is not None:
                self._selected_speedup = record.selected_speedup
                return self._selected(backend, ctx)
        return self._none_qualified(ctx)
