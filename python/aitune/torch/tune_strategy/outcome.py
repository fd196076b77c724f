"""The plain "kept eager" outcome (docs/guide.md, "When nothing qualifies"): a graph whose
candidates were all unavailable, failed, or not faster than eager is not an error. aitune says
so at INFO in one line, serves the original module, and records the outcome `kept_eager` in the
telemetry; a WARNING is kept for unexpected exceptions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

KEPT_EAGER = "kept_eager"
TUNED = "tuned"
REUSED = "reused"
FAILED = "failed"


@dataclasses.dataclass
class KeptEager:
    """Why a graph kept eager: the best measured candidate and its speedup over eager, or how many
    candidates were unavailable or failed (with the first failure's log)."""

    module: str
    graph: str
    best_candidate: str | None = None
    best_speedup: float | None = None
    gate: str = ""  # e.g. "≥ 1.01×" or "> 1.00×"
    gate_detail: str = ""  # what else the gate asked for, when that decided
    unavailable: int = 0
    failed: int = 0
    failure_log: Path | None = None
    over_budget: int = 0  # skipped or abandoned by the tuning budget

    def message(self) -> str:
        where = f"{self.module}.{self.graph}"
        if self.best_candidate is not None and self.best_speedup is not None:
            detail = f"; {self.gate_detail}" if self.gate_detail else ""
            return (
                f"🟰 {where}: kept eager — {self.best_candidate} was {self.best_speedup:.2f}× eager "
                f"(needs {self.gate}{detail})"
            )
        see = f": see {self.failure_log}" if self.failure_log is not None else ""
        budget = f", {self.over_budget} over the tuning budget" if self.over_budget else ""
        return (
            f"🟰 {where}: kept eager — no candidate built ({self.unavailable} unavailable, {self.failed} failed"
            f"{budget}{see})"
        )


@dataclasses.dataclass
class CandidateTally:
    """What happened to one graph's candidates, for the kept-eager line."""

    unavailable: int = 0
    failed: int = 0
    failure_log: Path | None = None
    best_candidate: str | None = None
    best_speedup: float | None = None
    best_detail: str = ""
    over_budget: int = 0

    def record_failure(self, log_file: Path | None) -> None:
        self.failed += 1
        if self.failure_log is None and log_file is not None:
            self.failure_log = log_file

    def record_speedup(self, candidate: str, speedup: float, detail: str = "") -> None:
        if speedup != speedup:  # NaN: not measured
            return
        if self.best_speedup is None or speedup > self.best_speedup:
            self.best_candidate, self.best_speedup, self.best_detail = candidate, speedup, detail

    def kept_eager(self, module: str, graph: str, gate: str) -> KeptEager:
        return KeptEager(
            module,
            graph,
            self.best_candidate,
            self.best_speedup,
            gate,
            self.best_detail,
            self.unavailable,
            self.failed,
            self.failure_log,
            self.over_budget,
        )
