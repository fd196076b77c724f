"""The native measurement, selection and numeric-validation bindings
(docs/reference/strategies.md#selection-and-the-gate, docs/reference/validation.md#numeric-comparison,
docs/reference/measurement.md).

Statistics and metrics are checked against numpy computations of the documented formulas; the
measurement loop is driven with synthetic timings so every count and value is known exactly."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest
import torch

from aitune import exceptions as exc
from aitune._native import _C
from aitune.torch.task.profiling.config import (
    AllSamplesProfilingStopStrategy,
    NumStepsMeasuringStopStrategy,
    StableWindowMeasuringStopStrategy,
    ThroughputSaturatedProfilingStopStrategy,
)
from aitune.torch.validation import (
    DEFAULT_TOLERANCES,
    NumericTolerance,
    PrecisionClass,
    resolve_tolerance,
)

STAT_NAMES = ["mean", "median", "p90", "p99", "min", "max", "std"]
BATCH_RESULT_KEYS = (
    {"batch_size", "num_warmup_calls", "num_measured_calls", "throughput_per_s", "host_latency_cv", "device_time_cv"}
    | {f"host_latency_ms_{s}" for s in STAT_NAMES}
    | {f"device_time_ms_{s}" for s in STAT_NAMES}
)
CORE_METRIC_KEYS = ("max_abs_error", "max_rel_error", "rel_l2_error", "mismatch_fraction", "has_nan", "numel")
FIXED_RULE = {"kind": "fixed", "num_steps": 20, "warmup_samples": 10}
UNSTABLE_RE = re.compile(
    r"^Unable to collect stable results\. Current CV of last window: (\d+\.\d{2})%\. Expected max CV: 10\.00%\.$"
)


def numpy_stats(values) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    mean = float(np.mean(a))
    std = float(np.std(a, ddof=0))
    return {
        "mean": mean,
        "median": float(np.median(a)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
        "min": float(np.min(a)),
        "max": float(np.max(a)),
        "std": std,
        "cv": std / mean,
    }


def assert_stats_match(actual: dict, expected: dict) -> None:
    for key, value in expected.items():
        assert actual[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key


def core_metrics(metrics: dict) -> dict:
    return {k: metrics[k] for k in CORE_METRIC_KEYS}


# ---------------------------------------------------------------- statistics
# (docs/reference/measurement.md#batch-sweep)


@pytest.mark.parametrize("n", [1, 2, 7, 20, 257])
def test_compute_stats_matches_numpy(n):
    rng = np.random.default_rng(1000 + n)
    values = rng.lognormal(mean=0.5, sigma=0.4, size=n)
    stats = _C.compute_stats(values.tolist())
    assert set(stats) == {"mean", "median", "p90", "p99", "min", "max", "std", "cv"}
    assert_stats_match(stats, numpy_stats(values))
    # order statistics and the linear interpolation are the same arithmetic as numpy
    for key, q in (("median", 50), ("p90", 90), ("p99", 99)):
        assert stats[key] == float(np.percentile(values, q)), key
    assert stats["min"] == values.min() and stats["max"] == values.max()


def test_compute_stats_uses_population_std_and_cv():
    stats = _C.compute_stats([1.0, 3.0])
    assert stats["std"] == 1.0  # ddof=0; the sample std would be sqrt(2)
    assert stats["cv"] == 0.5


@pytest.mark.parametrize("q", [0, 1, 12.5, 25, 33.3, 50, 75, 90, 99, 100])
def test_percentile_on_unsorted_input_matches_numpy(q):
    rng = np.random.default_rng(7)
    values = rng.normal(10.0, 3.0, size=37)
    values[5] = values[6]  # a duplicate
    assert not np.all(np.diff(values) >= 0)
    assert _C.percentile(values.tolist(), q) == pytest.approx(float(np.percentile(values, q)), rel=1e-14)


def test_percentile_small_unsorted_examples():
    assert _C.percentile([5.0, 1.0, 4.0, 2.0, 3.0], 50) == 3.0
    assert _C.percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert _C.percentile([10.0, 0.0], 90) == pytest.approx(9.0)
    assert _C.percentile([3.0, 1.0, 2.0], 0) == 1.0
    assert _C.percentile([3.0, 1.0, 2.0], 100) == 3.0


# ---------------------------------------------------------------- measure_batch (docs/reference/measurement.md)


def test_fixed_rule_makes_exactly_30_calls_and_uses_the_last_20():
    calls = []

    def call(i):
        calls.append(i)
        if i < 10:
            return (1e8, None)  # 100 ms warmup calls must not enter the statistics
        return (1e6 * (1 + i % 3), None)

    result = _C.measure_batch(call, 4, FIXED_RULE)
    assert calls == list(range(30))
    assert set(result) == BATCH_RESULT_KEYS
    assert result["batch_size"] == 4
    assert result["num_warmup_calls"] == 10
    assert result["num_measured_calls"] == 20

    measured_ns = np.array([1e6 * (1 + i % 3) for i in range(10, 30)])
    expected = numpy_stats(measured_ns / 1e6)
    actual = {k: result[f"host_latency_ms_{k}"] for k in STAT_NAMES}
    actual["cv"] = result["host_latency_cv"]
    assert_stats_match(actual, expected)
    assert result["throughput_per_s"] == pytest.approx(4 * 1e9 / measured_ns.mean(), rel=1e-12)

    for key in [f"device_time_ms_{s}" for s in STAT_NAMES] + ["device_time_cv"]:
        assert result[key] is None, key


def test_fixed_rule_device_time_statistics():
    def call(i):
        return (2e6, 0.5 * (1 + i % 4) if i >= 10 else 50.0)

    result = _C.measure_batch(call, 1, FIXED_RULE)
    device = np.array([0.5 * (1 + i % 4) for i in range(10, 30)])
    actual = {k: result[f"device_time_ms_{k}"] for k in STAT_NAMES}
    actual["cv"] = result["device_time_cv"]
    assert_stats_match(actual, numpy_stats(device))
    assert result["throughput_per_s"] == pytest.approx(1e9 / 2e6, rel=1e-12)


def test_fixed_rule_honours_custom_counts():
    calls = []

    def call(i):
        calls.append(i)
        return (1e6, None)

    result = _C.measure_batch(call, 2, {"kind": "fixed", "num_steps": 5, "warmup_samples": 3})
    assert len(calls) == 8
    assert (result["num_warmup_calls"], result["num_measured_calls"]) == (3, 5)


def test_default_python_strategies_translate_to_native_rules():
    calls = []

    def call(i):
        calls.append(i)
        return (1e6, None)

    _C.measure_batch(call, 1, NumStepsMeasuringStopStrategy().to_native())
    assert len(calls) == 30
    calls.clear()
    _C.measure_batch(call, 1, StableWindowMeasuringStopStrategy().to_native())
    assert len(calls) == 30


def test_stable_rule_stops_early_on_constant_timings():
    calls = []

    def call(i):
        calls.append(i)
        return (2e6, None)

    result = _C.measure_batch(call, 8, {"kind": "stable"})
    assert len(calls) == 30  # 10 warmup + one window of 20, far below 10 + 100
    assert (result["num_warmup_calls"], result["num_measured_calls"]) == (10, 20)
    assert result["host_latency_ms_mean"] == 2.0
    assert result["host_latency_cv"] == 0.0
    assert result["throughput_per_s"] == pytest.approx(8 * 1e9 / 2e6)


def simulate_stable_rule(times, window=20, max_cv=0.10, warmup=10, max_samples=100):
    """Number of calls after which the docs/reference/measurement.md#one-measured-call stable-window rule stops (None:
    it fails)."""
    for end in range(warmup + window, len(times) + 1):
        last = np.asarray(times[end - window : end])
        if np.std(last) / np.mean(last) <= max_cv:
            return end
        if end - warmup >= max_samples:
            return None
    raise AssertionError("sequence too short")


def test_stable_rule_stops_at_the_first_stable_window():
    # noisy for the first 45 calls, then steady: the rule must stop exactly where numpy says
    times = [1e6 * (1 + 2 * (i % 2)) if i < 45 else 1e6 * (1 + 0.01 * (i % 5)) for i in range(200)]
    expected_calls = simulate_stable_rule(times)
    assert expected_calls is not None and 45 < expected_calls < 110
    calls = []

    def call(i):
        calls.append(i)
        return (times[i], None)

    result = _C.measure_batch(call, 1, {"kind": "stable"})
    assert len(calls) == expected_calls
    assert result["num_measured_calls"] == 20
    assert result["num_warmup_calls"] == expected_calls - 20
    last = np.asarray(times[expected_calls - 20 : expected_calls])
    assert result["host_latency_cv"] == pytest.approx(np.std(last) / np.mean(last), rel=1e-12)


@pytest.mark.parametrize(
    "timing",
    [
        pytest.param(lambda i: 1e6 * (1 + 2 * (i % 2)), id="alternating-1-3ms"),
        pytest.param(lambda i: 1e6 * (1 + 2 * (i % 2)) + 1e4 * i, id="alternating-with-drift"),
    ],
)
def test_stable_rule_gives_up_with_the_spec_message(timing):
    calls = []

    def call(i):
        calls.append(i)
        return (timing(i), None)

    with pytest.raises(RuntimeError) as info:
        _C.measure_batch(call, 1, {"kind": "stable"})
    assert type(info.value) is RuntimeError  # docs/reference/errors.md: a plain RuntimeError
    assert len(calls) == 110  # 10 warmup + max_samples 100
    match = UNSTABLE_RE.match(str(info.value))
    assert match, str(info.value)
    last = np.array([timing(i) for i in range(90, 110)])
    expected_cv_percent = np.std(last, ddof=0) / np.mean(last) * 100
    assert match.group(1) == f"{expected_cv_percent:.2f}"


def test_stable_rule_message_reports_the_configured_max_cv():
    rule = {"kind": "stable", "window_size": 4, "max_cv_ratio": 0.025, "warmup_samples": 1, "max_samples": 6}
    with pytest.raises(RuntimeError, match=r"Expected max CV: 2\.50%\.$"):
        _C.measure_batch(lambda i: (1e6 * (1 + i % 2), None), 1, rule)


class _Boom(Exception):
    pass


def test_exception_in_call_propagates_unchanged():
    raised = _Boom("boom at call 3")

    def call(i):
        if i == 3:
            raise raised
        return (1e6, None)

    with pytest.raises(_Boom) as info:
        _C.measure_batch(call, 1, FIXED_RULE)
    assert type(info.value) is _Boom
    assert info.value is raised


def test_out_of_memory_in_call_propagates_as_torch_oom():
    # profile.py catches torch.OutOfMemoryError around measure_batch to end the sweep
    def call(i):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate"):
        _C.measure_batch(call, 1, FIXED_RULE)


@pytest.mark.parametrize(
    "rule",
    [
        {"kind": "fixed", "num_step": 20},  # typo
        {"kind": "fixed", "num_steps": 0},
        {"kind": "stable", "window_size": 30, "max_samples": 20},
        {"kind": "sometimes"},
        {"num_steps": 20},
    ],
)
def test_invalid_measure_rules_raise_user_input_error(rule):
    with pytest.raises(exc.AITuneUserInputError):
        _C.measure_batch(lambda i: (1e6, None), 1, rule)


def test_invalid_host_time_is_an_error():
    with pytest.raises(exc.AITuneError):
        _C.measure_batch(lambda i: (float("nan"), None), 1, FIXED_RULE)


# ---------------------------------------------------------------- batch sweep (docs/reference/measurement.md)

SWEEP_BATCHES = [1, 2, 4, 8, 16, 32]
SWEEP_THROUGHPUTS = [100.0, 200.0, 300.0, 290.0, 280.0, 270.0]


def feed(sweep, batches=SWEEP_BATCHES, throughputs=SWEEP_THROUGHPUTS) -> list[bool]:
    return [sweep.add(bs, tp) for bs, tp in zip(batches, throughputs)]


def test_saturated_sweep_stops_at_third_saturated_size_with_default_backoff():
    sweep = _C.SweepState(rule="saturated", min_throughput_gain_ratio=0.05, throughput_backoff_limit=2)
    assert feed(sweep) == [False, False, False, False, False, True]
    assert sweep.best_batch_size == 4
    assert sweep.best_throughput == 300.0


def test_saturated_sweep_defaults_match_the_spec():
    assert feed(_C.SweepState()) == [False, False, False, False, False, True]
    native = ThroughputSaturatedProfilingStopStrategy().to_native()
    assert feed(_C.SweepState(**native)) == [False, False, False, False, False, True]


def test_saturated_sweep_with_zero_backoff_stops_at_first_saturated_size():
    sweep = _C.SweepState(rule="saturated", min_throughput_gain_ratio=0.05, throughput_backoff_limit=0)
    assert feed(sweep)[:4] == [False, False, False, True]


def test_unsaturated_size_resets_the_backoff_counter():
    sweep = _C.SweepState(throughput_backoff_limit=2)
    # 290, 280 saturated; 400 unsaturated resets; then 390, 380 saturated (2 in a row) -> no stop
    results = feed(sweep, [1, 2, 4, 8, 16, 32, 64, 128], [100, 300, 290, 280, 400, 390, 380, 370])
    assert results == [False] * 7 + [True]
    assert (sweep.best_batch_size, sweep.best_throughput) == (16, 400.0)


def test_small_gain_below_ratio_counts_as_saturated():
    sweep = _C.SweepState(min_throughput_gain_ratio=0.05, throughput_backoff_limit=0)
    assert sweep.add(1, 100.0) is False
    assert sweep.add(2, 105.0) is True  # 105 * 0.95 = 99.75 < 100


def test_all_rule_never_stops():
    sweep = _C.SweepState(rule="all")
    batches = _C.default_batch_sizes(0)
    throughputs = [1000.0 / (k + 1) for k in range(len(batches))]  # strictly decreasing
    assert not any(sweep.add(bs, tp) for bs, tp in zip(batches, throughputs))
    assert sweep.best_batch_size == 1
    assert sweep.best_throughput == 1000.0
    assert feed(_C.SweepState(**AllSamplesProfilingStopStrategy().to_native())) == [False] * 6


def test_sweep_best_before_any_add():
    sweep = _C.SweepState()
    assert sweep.best_batch_size is None
    assert sweep.best_throughput == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rule": "sometimes"},
        {"min_throughput_gain_ratio": 1.0},
        {"min_throughput_gain_ratio": -0.1},
        {"throughput_backoff_limit": -1},
    ],
)
def test_invalid_sweep_settings_raise(kwargs):
    with pytest.raises(exc.AITuneUserInputError):
        _C.SweepState(**kwargs)


def test_default_batch_sizes():
    assert _C.default_batch_sizes(0) == [2**n for n in range(21)]
    assert _C.default_batch_sizes() == [2**n for n in range(21)]
    assert _C.default_batch_sizes(-5) == [2**n for n in range(21)]
    assert _C.default_batch_sizes(1) == [1]
    assert _C.default_batch_sizes(48) == [1, 2, 4, 8, 16, 32]
    assert _C.default_batch_sizes(64) == [1, 2, 4, 8, 16, 32, 64]
    assert _C.default_batch_sizes(2**30) == [2**n for n in range(21)]


# ---------------------------------------------------------------- selection and gate
# (docs/reference/strategies.md#selection-and-the-gate)


def test_pick_best_tie_keeps_the_first():
    assert _C.pick_best([("a", True, 10.0), ("b", True, 10.0), ("c", True, 10.0)], "throughput") == 0
    assert _C.pick_best([("a", True, 3.0), ("b", True, 3.0)], "latency") == 0


def test_pick_best_only_strictly_better_replaces():
    assert _C.pick_best([("a", True, 10.0), ("b", True, math.nextafter(10.0, 11.0))], "throughput") == 1
    assert _C.pick_best([("a", True, 10.0), ("b", True, 9.0), ("c", True, 12.0), ("d", True, 12.0)], "throughput") == 2


def test_pick_best_latency_picks_the_lowest():
    items = [("a", True, 5.0), ("b", True, 3.0), ("c", True, 3.0), ("d", True, 4.0), ("e", True, 9.0)]
    assert _C.pick_best(items, "latency") == 1
    assert _C.pick_best(items, "throughput") == 4


def test_pick_best_skips_failed_and_nan_candidates():
    items = [("a", False, 1000.0), ("b", True, float("nan")), ("c", True, 1.0)]
    assert _C.pick_best(items, "throughput") == 2
    assert _C.pick_best([("a", False, 1.0)], "throughput") is None
    assert _C.pick_best([], "latency") is None
    with pytest.raises(exc.AITuneUserInputError):
        _C.pick_best([("a", True, 1.0)], "speed")


def test_first_wins_gate_boundary():
    assert _C.passes_first_wins_gate(1.01, 1.0) is True
    assert _C.passes_first_wins_gate(1.009, 1.0) is False
    assert _C.passes_first_wins_gate(_C.speedup_throughput(101.0, 100.0), 1.0) is True
    assert _C.passes_first_wins_gate(1.0, 0.0) is True  # >= with threshold 0


def test_profiling_gate_ties_go_to_the_baseline():
    assert _C.passes_profiling_gate(1.0, 0.0) is False
    assert _C.passes_profiling_gate(1.0001, 0.0) is True
    assert _C.passes_profiling_gate(_C.speedup_latency(10.0, 10.0), 0.0) is False
    assert _C.passes_profiling_gate(1.05, 5.0) is False
    assert _C.passes_profiling_gate(1.06, 5.0) is True


def test_speedups():
    assert _C.speedup_throughput(200.0, 100.0) == 2.0
    assert _C.speedup_latency(5.0, 10.0) == 2.0  # baseline latency / candidate latency


@pytest.mark.parametrize(
    "candidate, baseline",
    [(0.0, 10.0), (10.0, 0.0), (-1.0, 10.0), (10.0, -2.0), (float("nan"), 10.0), (10.0, float("nan"))],
)
def test_speedups_are_nan_on_non_positive_inputs(candidate, baseline):
    assert math.isnan(_C.speedup_throughput(candidate, baseline))
    assert math.isnan(_C.speedup_latency(candidate, baseline))


def test_best_within_budget():
    points = [(1, 2.0, 500.0), (2, 3.0, 667.0), (4, 5.0, 800.0), (8, 12.0, 667.0), (16, 30.0, 900.0)]
    assert _C.best_within_budget(points, 10.0) == (4, 5.0, 800.0)
    assert _C.best_within_budget(points, 5.0) == (4, 5.0, 800.0)  # latency equal to the budget is within
    assert _C.best_within_budget(points, 4.9) == (2, 3.0, 667.0)
    assert _C.best_within_budget(points, 100.0) == (16, 30.0, 900.0)
    assert _C.best_within_budget(points, 1.0) is None
    assert _C.best_within_budget([], 10.0) is None


def test_best_within_budget_tie_keeps_the_first():
    assert _C.best_within_budget([(1, 1.0, 100.0), (2, 2.0, 100.0)], 10.0) == (1, 1.0, 100.0)


def test_budget_failure_message():
    assert _C.budget_failure_message(10) == "No backend satisfied latency budget 10.000 ms"
    assert _C.budget_failure_message(2.5) == "No backend satisfied latency budget 2.500 ms"


# ---------------------------------------------------------------- tolerances
# (docs/reference/validation.md#numeric-comparison)

SPEC_TOLERANCES = {
    "fp32": (1e-5, 1e-4, 1e-4, 0.0),
    "tf32": (1e-3, 1e-2, 5e-3, 1e-2),  # 1 % mismatched for tf32/fp16/bf16 (docs/guide.md, "Checks")
    "fp16": (1e-2, 1e-2, 1e-2, 1e-2),
    "bf16": (3e-2, 3e-2, 3e-2, 1e-2),
    "int8": (1e-1, 1e-1, 1e-1, 5e-2),
    "fp8": (1e-1, 1e-1, 1e-1, 5e-2),
}
# The noise bound (ratio, floor) of docs/reference/validation.md#the-noise-bound.
NOISE_BOUNDS = {"tf32": (2.0, 2e-3), "fp16": (2.0, 1e-3), "bf16": (2.0, 2e-3)}


def test_default_tolerances_match_the_spec_table():
    assert {cls.value for cls in DEFAULT_TOLERANCES} == set(SPEC_TOLERANCES)
    for name, (atol, rtol, rel_l2, mismatch) in SPEC_TOLERANCES.items():
        ratio, floor = NOISE_BOUNDS.get(name, (0.0, 0.0))
        expected = NumericTolerance(
            atol=atol,
            rtol=rtol,
            max_rel_l2=rel_l2,
            max_mismatch_fraction=mismatch,
            max_noise_ratio=ratio,
            noise_floor=floor,
        )
        assert DEFAULT_TOLERANCES[PrecisionClass(name)] == expected, name
        assert _C.default_tolerance(name) == expected.to_native(), name


def test_default_tolerance_rejects_unknown_class():
    with pytest.raises(exc.AITuneUserInputError, match="fp64"):
        _C.default_tolerance("fp64")


def test_resolve_tolerance_precedence():
    backend = NumericTolerance(0.5, 0.5, 0.5, 0.5)
    single = NumericTolerance(0.2, 0.2, 0.2, 0.2)
    per_class = {
        PrecisionClass.FP16: NumericTolerance(0.3, 0.3, 0.3, 0.3),
        "int8": NumericTolerance(0.4, 0.4, 0.4, 0.4),
    }

    assert resolve_tolerance("fp16", backend, single) == backend
    assert resolve_tolerance("fp16", backend, per_class) == backend
    assert resolve_tolerance("fp16", backend, None) == backend
    assert resolve_tolerance("fp16", None, single) == single
    assert resolve_tolerance("fp32", None, single) == single
    assert resolve_tolerance("fp16", None, per_class) == per_class[PrecisionClass.FP16]
    assert resolve_tolerance("int8", None, per_class) == per_class["int8"]
    assert resolve_tolerance("bf16", None, per_class) == DEFAULT_TOLERANCES[PrecisionClass.BF16]
    assert resolve_tolerance("tf32", None, None) == DEFAULT_TOLERANCES[PrecisionClass.TF32]


@pytest.mark.parametrize("field", ["atol", "rtol", "max_rel_l2", "max_mismatch_fraction"])
def test_numeric_tolerance_rejects_negative_values(field):
    values = {"atol": 0.1, "rtol": 0.1, "max_rel_l2": 0.1, "max_mismatch_fraction": 0.1}
    values[field] = -1e-9
    with pytest.raises(ValueError, match=field):
        NumericTolerance(**values)


def test_numeric_tolerance_rejects_mismatch_fraction_above_one():
    with pytest.raises(ValueError):
        NumericTolerance(0.1, 0.1, 0.1, 1.5)


def test_leaf_passes_boundaries():
    tol = {"atol": 1e-3, "rtol": 1e-2, "max_rel_l2": 5e-3, "max_mismatch_fraction": 1e-3}
    ok = {"max_abs_error": 1.0, "max_rel_error": 1.0, "rel_l2_error": 5e-3, "mismatch_fraction": 1e-3}
    assert _C.leaf_passes(ok, tol) is True  # both limits inclusive
    assert _C.leaf_passes({**ok, "rel_l2_error": 5.0001e-3}, tol) is False
    assert _C.leaf_passes({**ok, "mismatch_fraction": 1.0001e-3}, tol) is False
    assert _C.leaf_passes({**ok, "rel_l2_error": float("nan")}, tol) is False
    zero = {"max_abs_error": 0.0, "max_rel_error": 0.0, "rel_l2_error": 0.0, "mismatch_fraction": 0.0}
    assert _C.leaf_passes({**zero, "has_nan": True}, tol) is False


# ---------------------------------------------------------------- compare_tensors
# (docs/reference/validation.md#numeric-comparison)


def numpy_metrics(c: np.ndarray, r: np.ndarray, atol: float, rtol: float) -> dict[str, float]:
    c = c.astype(np.float64)
    r = r.astype(np.float64)
    diff = np.abs(c - r)
    return {
        "max_abs_error": float(diff.max()),
        "max_rel_error": float(np.max(diff / np.maximum(np.abs(r), atol))),
        "rel_l2_error": float(np.linalg.norm(diff) / max(np.linalg.norm(r), atol * math.sqrt(r.size))),
        "mismatch_fraction": float(np.mean(~(diff <= atol + rtol * np.abs(r)))),
    }


def test_compare_identical_tensors():
    r = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    m = _C.compare_tensors(r.clone(), r, 1e-5, 1e-4)
    assert m["max_abs_error"] == 0.0
    assert m["max_rel_error"] == 0.0
    assert m["rel_l2_error"] == 0.0
    assert m["mismatch_fraction"] == 0.0
    assert m["has_nan"] is False
    assert m["numel"] == 20
    assert m["dtype_differs"] is False


def test_compare_known_perturbation_fp64():
    atol, rtol = 1e-3, 1e-2
    r = np.linspace(-2.0, 2.0, 50)
    c = r.copy()
    c[3] += 0.5  # mismatch
    c[10] -= 0.02  # |r|~1.18: 0.02 > 1e-3 + 1.18e-2 -> mismatch
    c[25] += 1e-4  # within tolerance
    c[40] += 5e-3  # |r|~1.27: 5e-3 <= 1e-3 + 1.27e-2 -> within
    m = _C.compare_tensors(torch.from_numpy(c), torch.from_numpy(r), atol, rtol, True)
    expected = numpy_metrics(c, r, atol, rtol)
    assert expected["mismatch_fraction"] == pytest.approx(2 / 50)
    assert expected["max_abs_error"] == pytest.approx(0.5)
    for key, value in expected.items():
        assert m[key] == pytest.approx(value, rel=1e-12), key
    assert m["has_nan"] is False
    assert m["numel"] == 50


def test_compare_known_perturbation_fp32():
    atol, rtol = 1e-2, 1e-2
    gen = torch.Generator().manual_seed(3)
    r = torch.randn(8, 16, generator=gen)
    c = r + 0.003 * torch.randn(8, 16, generator=gen)
    c[0, :4] += 0.3
    m = _C.compare_tensors(c, r, atol, rtol)
    expected = numpy_metrics(c.numpy(), r.numpy(), atol, rtol)
    for key in ("max_abs_error", "rel_l2_error"):
        assert m[key] == pytest.approx(expected[key], rel=1e-5), key
    assert m["max_rel_error"] == pytest.approx(expected["max_rel_error"], rel=1e-4)
    assert m["mismatch_fraction"] == pytest.approx(expected["mismatch_fraction"], abs=1.5 / 128)
    assert m["mismatch_fraction"] >= 4 / 128


def test_compare_rel_l2_uses_atol_floor_for_tiny_reference():
    atol = 1e-2
    r = np.zeros(16)
    c = np.full(16, 1e-3)
    m = _C.compare_tensors(torch.from_numpy(c), torch.from_numpy(r), atol, 0.0, True)
    # ||c - r|| / max(||r||, atol * sqrt(n)) = (1e-3 * 4) / (1e-2 * 4)
    assert m["rel_l2_error"] == pytest.approx(0.1, rel=1e-12)
    assert m["max_rel_error"] == pytest.approx(0.1, rel=1e-12)
    assert m["mismatch_fraction"] == 0.0


def test_compare_nan_candidate_never_passes():
    r = torch.ones(10)
    c = r.clone()
    c[4] = float("nan")
    m = _C.compare_tensors(c, r, 1e-1, 1e-1)
    assert m["has_nan"] is True
    assert m["mismatch_fraction"] == pytest.approx(0.1)  # the NaN element counts as mismatched
    loose = {"atol": 1.0, "rtol": 1.0, "max_rel_l2": 1.0, "max_mismatch_fraction": 1.0}
    assert _C.leaf_passes(core_metrics(m), loose) is False


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_compare_integer_tensors_count_unequal_elements(dtype):
    r = torch.arange(20).to(dtype)
    c = r.clone()
    c[[1, 5, 9]] += 1
    m = _C.compare_tensors(c, r, 10.0, 10.0)  # huge tolerances must not hide integer differences
    assert m["mismatch_fraction"] == pytest.approx(3 / 20)
    assert m["has_nan"] is False
    assert m["max_abs_error"] == 1.0


def test_compare_bool_tensors_count_unequal_elements():
    r = torch.tensor([True, False, True, False, True, True, False, False])
    c = r.clone()
    c[0] = False
    c[3] = True
    m = _C.compare_tensors(c, r, 1.0, 1.0)
    assert m["mismatch_fraction"] == pytest.approx(2 / 8)


def test_compare_reports_dtype_difference_without_failing():
    r = torch.linspace(0, 1, 10)
    m = _C.compare_tensors(r.half(), r, 1e-2, 1e-2)
    assert m["dtype_differs"] is True
    assert m["candidate_dtype"] != m["reference_dtype"]
    tol = NumericTolerance(*SPEC_TOLERANCES["fp16"]).to_native()
    assert _C.leaf_passes(core_metrics(m), tol) is True


def test_compare_shape_mismatch_names_both_shapes():
    with pytest.raises(exc.AITuneError) as info:
        _C.compare_tensors(torch.zeros(3, 2), torch.zeros(2, 3), 1e-3, 1e-3)
    message = str(info.value)
    assert "[2, 3]" in message and "[3, 2]" in message


# ---------------------------------------------------------------- time_call
# (docs/reference/measurement.md#one-measured-call)


def test_time_call_on_cpu_measures_host_time():
    calls = []

    def fn():
        calls.append(torch.is_grad_enabled())
        time.sleep(0.01)

    host_ns, device_ms = _C.time_call(fn, None)
    assert calls == [False]  # called once, under no_grad
    assert device_ms is None
    assert 9e6 <= host_ns < 5e9


def test_time_call_fast_call_is_positive():
    result = _C.time_call(lambda: None)
    assert isinstance(result, tuple) and len(result) == 2
    assert result[0] > 0
    assert result[1] is None


def test_time_call_exception_propagates_with_its_type():
    def fn():
        raise _Boom("inside the timed call")

    with pytest.raises(_Boom, match="inside the timed call"):
        _C.time_call(fn, None)
