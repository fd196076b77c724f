"""What strategies report per candidate, under AITune's class names and attributes
(docs/guide.md, "Coming from AITune").

`strategy.perf_validation_results` holds `PerformanceValidationMixinResult`s (FirstWins,
OneBackend: throughput against the eager baseline) or `BackendPerfResult`s (the profiling
strategies: their metric against eager's). They read as attributes, as in AITune
(`r.metric`, `r.baseline_metric`), and also as a mapping (`r["passed"]`, `r.get(...)`), the
form aitune's telemetry and earlier releases use."""

from __future__ import annotations

import abc
import dataclasses


class _ReadsAsMapping:
    """`result["field"]`, `result.get("field")` and `dict(result)` over the dataclass fields."""

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def keys(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)]  # type: ignore[arg-type]

    def __getitem__(self, key: str) -> object:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: object = None) -> object:
        return getattr(self, key) if key in self.keys() else default

    def __contains__(self, key: object) -> bool:
        return key in self.keys()


@dataclasses.dataclass
class PerformanceValidationMixinResult(_ReadsAsMapping):
    """FirstWins / OneBackend gate result. `throughput` and `baseline_throughput` are samples/s at
    the first gate batch size; `speedup` is the geometric mean over `batch_sizes` (docs/guide.md,
    "The performance gate") [Δ: AITune measures one batch size]."""

    backend_description: str
    throughput: float
    baseline_throughput: float
    speedup: float
    passed: bool
    batch_sizes: list[int] = dataclasses.field(default_factory=list)
    speedups: list[float] = dataclasses.field(default_factory=list)
    worst_speedup: float | None = None


@dataclasses.dataclass
class BackendPerfResult(_ReadsAsMapping):
    """A profiling strategy's candidate against the eager baseline: `metric` and
    `baseline_metric` are throughput (samples/s) or latency (ms), by strategy."""

    backend_description: str
    metric: float
    baseline_metric: float
    speedup: float
    passed: bool


@dataclasses.dataclass(kw_only=True)
class BackendProfilingResult(abc.ABC):
    """One candidate's profiled result at its selected batch size."""

    selected_batch_size: int

    @property
    @abc.abstractmethod
    def metric(self) -> float: ...

    def to_json_dict(self, metric_label: str) -> dict[str, object]:
        """The fields a strategy adds to the candidate's `backend_results` entry."""
        return {metric_label: self.metric, "selected_batch_size": self.selected_batch_size}


@dataclasses.dataclass(kw_only=True)
class MaxThroughputProfilingResult(BackendProfilingResult):
    throughput: float

    @property
    def metric(self) -> float:
        return self.throughput


@dataclasses.dataclass(kw_only=True)
class MinLatencyProfilingResult(BackendProfilingResult):
    selected_batch_size: int = 1
    latency: float  # ms

    @property
    def metric(self) -> float:
        return self.latency


@dataclasses.dataclass(kw_only=True)
class LatencyBudgetProfilingResult(BackendProfilingResult):
    throughput: float
    latency: float  # ms, at selected_batch_size

    @property
    def metric(self) -> float:
        return self.throughput

    def to_json_dict(self, metric_label: str) -> dict[str, object]:
        return {**super().to_json_dict(metric_label), "latency": self.latency}
