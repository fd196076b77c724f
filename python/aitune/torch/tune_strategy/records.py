"""What evaluating one candidate found (docs/design.md#the-strategy-contract): `TuneStrategy.evaluate` makes a
record per candidate (in a device-pool worker, docs/guide.md "Tuning on several GPUs"), and the
strategy's `decide` picks from the records (remote_builds.py serves the winner's build here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from aitune.torch.tune_data.model import BuildReport
from aitune.torch.tune_strategy.outcome import CandidateTally


@dataclasses.dataclass
class BuiltCandidate:
    """Enough of a worker's build to serve it elsewhere."""

    artifacts: dict[str, Path]
    input_profile: list[tuple[list[int], list[int | None]]] | None
    validated_precision: dict[str, object] | None
    derived_from: str | None


@dataclasses.dataclass
class CandidateRecord:
    index: int  # position in the strategy's candidate list
    device: str
    describe: str
    backend_results: list[dict[str, object]] = dataclasses.field(default_factory=list)
    perf_validation_results: list[dict[str, object]] = dataclasses.field(default_factory=list)
    tally: CandidateTally = dataclasses.field(default_factory=CandidateTally)
    builds: list[BuildReport] = dataclasses.field(default_factory=list)
    passed: bool = False  # FirstWins: the gate passed
    selected_speedup: tuple | None = None  # FirstWins: (geomean, eager, candidate) when passed
    point: tuple | None = None  # profiling strategies: (metric, batch size, latency ms, throughput)
    built: BuiltCandidate | None = None  # a build that qualified, to serve on the tuning device
    worker: int = -1  # the pool's worker index (two workers may share a device, e.g. ["cpu", "cpu"])
    throughput_scale: float = 1.0  # the tuning device's eager baseline over this device's
    latency_scale: float = 1.0

    def scaled_point(self, metric_name: str) -> tuple[float, int, float, float]:
        """The point as measured on the tuning device, by the ratio of the eager baselines."""
        metric, batch_size, latency_ms, throughput = self.point  # type: ignore[misc]
        scale = self.latency_scale if metric_name == "latency" else self.throughput_scale
        return metric * scale, batch_size, latency_ms * self.latency_scale, throughput * self.throughput_scale


class RemoteBuild:
    """Stands for a worker's build in a profiling strategy's selection (describe, deactivate)."""

    def __init__(self, record: CandidateRecord) -> None:
        self.record = record

    def describe(self) -> str:
        return self.record.describe

    def deactivate(self) -> None:
        pass  # the worker released it after measuring
