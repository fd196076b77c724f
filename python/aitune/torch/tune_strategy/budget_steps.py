"""The tuning budget's steps in a strategy (docs/reference/strategies.md#tuning-budget): where a
graph's budget comes from, the log line that opens it, and a candidate abandoned at the deadline in
its build, its checks or its measurement. A mixin of TuneStrategy, which provides what these
methods read: `budget_s`, `_walks_candidates`, `candidates()`, `_log`, `_tally` and
`backend_results`."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, Callable, TypeVar

from aitune.exceptions import TuningBudgetExceeded
from aitune.torch.backend.backend import Backend
from aitune.torch.backend.common.compile_caches import reset_compiler_caches
from aitune.torch.config import config
from aitune.torch.tune_data import recorder as telemetry
from aitune.torch.tune_strategy.budget import TuningBudget, build_deadline
from aitune.torch.tune_strategy.context import GraphContext

_T = TypeVar("_T")


class BudgetSteps:
    budget_s: float | None
    _walks_candidates: bool
    backend_results: list[dict[str, Any]]
    _tally: Any
    candidates: Callable[[], list[Backend]]
    _log: Callable[..., None]

    def _graph_budget(self) -> TuningBudget | None:
        if not self._walks_candidates:
            return None
        if self.budget_s is not None:
            return TuningBudget.for_graph(self.budget_s, "the strategy's budget_s")
        if config.tuning_budget_s is not None:
            return TuningBudget.for_graph(config.tuning_budget_s, "config.tuning_budget_s")
        return None

    def _budget_in_effect(self) -> bool:
        return self._walks_candidates and (self.budget_s is not None or config.tuning_budget_s is not None)

    def _log_budget(self, ctx: GraphContext) -> None:
        if ctx.budget is None:
            return
        order = [(b.describe(), round(b.expected_build_cost(), 3)) for b in self.candidates()]
        self._log(
            "⌛ Tuning budget %g s (%s): %.1f s left; candidates in this order (relative build cost): %s",
            ctx.budget.budget_s,
            ctx.budget.source,
            ctx.budget.left_s(),
            ", ".join(f"{name} ({cost:g})" for name, cost in order),
        )
        telemetry.record_budget({**ctx.budget.describe(), "order": [{"backend": n, "cost": c} for n, c in order]})

    def _abandon(
        self,
        backend: Backend,
        ctx: GraphContext,
        error: BaseException,
        log_file: Path,
        result: dict,
        build_ended: bool = False,
    ) -> None:
        """A candidate the budget's deadline interrupted, in its build or later (a JIT backend
        compiles at its first call of a shape: in the checks or the measurement): dropped (with
        what it held in torch's compiler caches) and counted over budget, not failed; nothing of
        it stays running. `build_ended`: its build report is already closed."""
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "a") as f:
            f.write("\n" + "".join(traceback.format_exception(error)))
        reason = str(error) if isinstance(error, TuningBudgetExceeded) else f"the tuning budget ran out ({error})"
        self._log("⌛ backend abandoned (log file: %s): %s", log_file, reason)
        result.update({"success": False, "error": f"TuningBudgetExceeded: {reason}", "abandoned": reason})
        if build_ended:
            telemetry.fail_build(error, backend.describe())
        else:
            telemetry.end_build(False, error)
        telemetry.mark_over_budget("abandoned", backend.describe(), reason)
        self._tally.over_budget += 1
        backend.deactivate()
        reset_compiler_caches()
        ctx.module.to(ctx.device)

    def _measured_within_budget(self, backend: Backend, ctx: GraphContext, measure: Callable[[], _T]) -> _T | None:
        """`measure()` (the strategy's measurement of `backend`) under the tuning budget's deadline
        (a JIT backend compiles shapes it meets first in the measurement); None when the deadline
        abandoned the candidate."""
        try:
            with build_deadline(ctx.budget, backend.describe(), during="its measurement"):
                return measure()
        except TuningBudgetExceeded as e:
            error: BaseException = e
        except Exception as e:
            if ctx.budget is None or not ctx.budget.fired:  # not the deadline: the candidate's own failure
                raise
            error = e  # a compiler re-raised the interrupt as its own
        log_file = ctx.cache_dir / backend.key() / "build.log"
        self._abandon(backend, ctx, error, log_file, self.backend_results[-1], build_ended=True)
        return None
