"""The tuning budget (docs/reference/strategies.md#tuning-budget): how long one ait.tune may spend, what a
candidate is expected to cost, and the deadline that abandons a build still running when it passes.

The budget counts from the start of ait.tune (`session_started`, installed by tuning.py), or,
outside ait.tune (JIT mode, a strategy's tune() called directly), from the start of each graph.
A candidate's expected build time is its backend's relative cost (`Backend.expected_build_cost()`)
times the seconds per cost unit the builds so far took (one mean for the whole ait.tune); before
any build has finished nothing is skipped for its cost, only for a spent budget."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
from types import FrameType
from typing import Callable, Iterator

from aitune.exceptions import TuningBudgetExceeded

_STARTED: list[float] = []  # time.monotonic() at the start of each ait.tune in progress


@contextlib.contextmanager
def session_started(started_s: float | None = None) -> Iterator[None]:
    """The budget of graphs tuned inside the block counts from `started_s` (default: now)."""
    started = time.monotonic() if started_s is None else started_s
    _STARTED.append(started)
    try:
        yield
    finally:
        _STARTED.pop()
        _SCALES.pop(started, None)


def session_start() -> float | None:
    return _STARTED[-1] if _STARTED else None


@dataclasses.dataclass
class BuildCostScale:
    """Seconds per unit of `Backend.expected_build_cost()`, learned from the builds so far."""

    seconds: float = 0.0
    units: float = 0.0

    def add(self, cost: float, duration_s: float) -> None:
        if cost > 0 and duration_s >= 0:
            self.seconds += duration_s
            self.units += cost

    @property
    def seconds_per_unit(self) -> float | None:
        return self.seconds / self.units if self.units > 0 else None


_SCALES: dict[float, BuildCostScale] = {}  # by session start: one scale per ait.tune


@dataclasses.dataclass
class TuningBudget:
    """One graph's view of the budget: `budget_s` from `started_s` (time.monotonic()), set by the
    strategy (`source` "strategy budget_s") or the config ("config.tuning_budget_s")."""

    budget_s: float
    source: str
    started_s: float
    scale: BuildCostScale = dataclasses.field(default_factory=BuildCostScale)
    clock: Callable[[], float] = time.monotonic
    fired: bool = False  # build_deadline's alarm went off (whatever a library made of the exception)

    @classmethod
    def for_graph(cls, budget_s: float, source: str) -> TuningBudget:
        started = session_start()
        if started is None:
            return cls(budget_s, source, time.monotonic())
        return cls(budget_s, source, started, _SCALES.setdefault(started, BuildCostScale()))

    @property
    def deadline_s(self) -> float:
        return self.started_s + self.budget_s

    def left_s(self) -> float:
        return self.deadline_s - self.clock()

    def expected_s(self, cost: float) -> float | None:
        per_unit = self.scale.seconds_per_unit
        return None if per_unit is None else cost * per_unit

    def skip_reason(self, cost: float, shares_a_build: bool) -> str | None:
        """Why a candidate of relative build cost `cost` is not started now, or None to start it.
        A candidate that serves a sibling's live build costs no build: only a spent budget stops it."""
        left = self.left_s()
        if left <= 0:
            return f"the tuning budget of {self.budget_s:g} s ({self.source}) is spent"
        expected = None if shares_a_build else self.expected_s(cost)
        if expected is not None and expected > left:
            return (
                f"its build is expected to take about {expected:.1f} s (relative cost {cost:g}), more than the "
                f"{left:.1f} s left of the tuning budget of {self.budget_s:g} s ({self.source})"
            )
        return None

    def describe(self) -> dict[str, object]:
        """For the telemetry: the budget, where it came from and what was left when the graph started."""
        return {"budget_s": self.budget_s, "source": self.source, "left_at_start_s": round(self.left_s(), 3)}


_REFIRE_S = 5.0  # after the deadline, the alarm repeats this often until the block exits (rarely enough
# that a repeat seldom lands in the cleanup the first interrupt started)


@contextlib.contextmanager
def build_deadline(budget: TuningBudget | None, what: str, during: str = "its build") -> Iterator[None]:
    """Raises TuningBudgetExceeded in this (the main) thread when the budget's deadline passes
    inside the block, through SIGALRM, and again every _REFIRE_S seconds until the block exits (a library
    that catches everything and carries on is interrupted again). Python runs the handler between
    bytecodes: a build waiting on a subprocess or sleeping is interrupted at once, native code that
    never returns to Python (a TensorRT engine build) only when it does. Off the main thread, or
    without SIGALRM, the block runs unbounded."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if budget is None or not usable:
        yield
        return
    left = budget.left_s()
    if left <= 0:
        raise TuningBudgetExceeded(f"{what}: the tuning budget of {budget.budget_s:g} s ({budget.source}) is spent")

    inside = [True]

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if not inside[0]:  # the block is exiting: its finally disarms the alarm
            return
        budget.fired = True
        raise TuningBudgetExceeded(
            f"{what}: the tuning budget of {budget.budget_s:g} s ({budget.source}) ran out during {during}"
        )

    budget.fired = False
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, left, _REFIRE_S)
    try:
        yield
    finally:
        inside[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
