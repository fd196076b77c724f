"""Latency and throughput of a list of ProfilingResultEvents (docs/guide.md, "Coming from
AITune"): latency is the mean execution time in ms, throughput batch_size × calls per second."""

from __future__ import annotations

from aitune.torch.task.profiling.events import ProfilingResultEvent


def _mean_ns(results: list[ProfilingResultEvent]) -> float:
    if not results:
        raise ValueError("metrics need at least one ProfilingResultEvent, got none")
    return sum(r.execution_time for r in results) / len(results)


def get_batch_size(results: list[ProfilingResultEvent]) -> int:
    sizes = {r.batch_size for r in results}
    if len(sizes) != 1:
        raise RuntimeError(f"All batch sizes must be the same, got {sorted(sizes)}")
    return sizes.pop()


def get_mean_executions_per_second(results: list[ProfilingResultEvent]) -> float:
    return 1e9 / _mean_ns(results)


def get_latency(results: list[ProfilingResultEvent]) -> float:
    """Mean latency in milliseconds."""
    return _mean_ns(results) / 1e6


def get_throughput(results: list[ProfilingResultEvent], batch_size: int | None = None) -> float:
    """Samples per second."""
    return (batch_size or get_batch_size(results)) * get_mean_executions_per_second(results)


def is_throughput_saturated(
    profiling_result: list[ProfilingResultEvent],
    min_throughput_gain_ratio: float,
    prev_results: list[ProfilingResultEvent],
) -> bool:
    """True when the new batch size does not gain `min_throughput_gain_ratio` over the previous best."""
    if not 0 <= min_throughput_gain_ratio <= 1:
        raise ValueError(f"min_throughput_gain_ratio must be between 0 and 1, got {min_throughput_gain_ratio}")
    if not prev_results:
        return False
    return get_throughput(profiling_result) * (1 - min_throughput_gain_ratio) < get_throughput(prev_results)
