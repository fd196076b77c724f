"""aitune.torch.task.profiling as AITune's users program against it: events, metrics, the stop
rules' should_stop()/get_events(), and ValueError for invalid settings at construction."""

import copy

import pytest
import torch

from aitune.exceptions import AITuneUserInputError
from aitune.torch.task.profiling import ProfilingConfig
from aitune.torch.task.profiling.events import ProfilingResultEvent, get_inference_events
from aitune.torch.task.profiling.measuring_stop_strategy import (
    NumStepsMeasuringStopStrategy,
    StableWindowMeasuringStopStrategy,
)
from aitune.torch.task.profiling.measuring_strategy import ModelExecutionTimeMeasuringStrategy
from aitune.torch.task.profiling.metrics import get_latency, get_throughput, is_throughput_saturated
from aitune.torch.task.profiling.profiling_stop_strategy import (
    AllSamplesProfilingStopStrategy,
    ThroughputSaturatedProfilingStopStrategy,
)


def events(batch_size: int, *times_ns: float, phase: str = "inference") -> list[ProfilingResultEvent]:
    return [
        ProfilingResultEvent(
            timestamp=i,
            model_name="m",
            backend_details="b",
            batch_size=batch_size,
            phase=phase,
            measurement_id=i,
            execution_time=t,
        )
        for i, t in enumerate(times_ns)
    ]


def test_metrics_of_events():
    batch = events(4, 2e6, 4e6)  # 2 ms and 4 ms
    assert get_latency(batch) == pytest.approx(3.0)
    assert get_throughput(batch) == pytest.approx(4 * 1e9 / 3e6)
    assert get_inference_events(events(1, 1.0) + events(1, 1.0, phase="warmup")) == events(1, 1.0)
    with pytest.raises(RuntimeError, match="All batch sizes must be the same"):
        get_throughput(events(1, 1.0) + events(2, 1.0))


def test_throughput_saturation_rule():
    # 8 at 3 ms: 2667/s vs 1333/s at 4 -> a gain, not saturated; 8 at 6 ms: 1333/s -> saturated
    assert not is_throughput_saturated(events(8, 3e6), 0.05, events(4, 3e6))
    assert is_throughput_saturated(events(8, 6e6), 0.05, events(4, 3e6))
    assert not is_throughput_saturated(events(8, 6e6), 0.05, [])


def test_num_steps_stops_after_warmup_plus_steps_and_keeps_the_last_steps():
    rule = NumStepsMeasuringStopStrategy(num_steps=3, warmup_samples=2)
    collected = []
    stops = []
    for t in (9e6, 9e6, 1e6, 2e6, 3e6):
        new = events(1, t)
        collected += new
        stops.append(rule.should_stop(new))
    assert stops == [False, False, False, False, True]
    assert [e.execution_time for e in rule.get_events(collected)] == [1e6, 2e6, 3e6]
    assert rule.to_native() == {"kind": "fixed", "num_steps": 3, "warmup_samples": 2}


def test_stable_window_stops_when_stable_and_raises_when_not():
    stable = StableWindowMeasuringStopStrategy(window_size=3, max_cv_ratio=0.1, warmup_samples=1, max_samples=5)
    assert not stable.should_stop(events(1, 50e6, 1e6, 1e6))  # warm-up + 2 of the window
    assert stable.should_stop(events(1, 1.01e6))
    unstable = StableWindowMeasuringStopStrategy(window_size=2, max_cv_ratio=0.01, warmup_samples=1, max_samples=3)
    assert not unstable.should_stop(events(1, 1e6, 1e6, 3e6))
    with pytest.raises(
        RuntimeError,
        match=r"Unable to collect stable results. Current CV of last window: .*"
        r"Expected max CV: 1.00%.",
    ):
        unstable.should_stop(events(1, 1e6))


def test_throughput_saturated_sweep_stops_after_the_backoff():
    rule = ThroughputSaturatedProfilingStopStrategy(min_throughput_gain_ratio=0.05, throughput_backoff_limit=1)
    # 1 -> 2 doubles throughput, then the same 2 ms at every size halves it each time: saturated twice -> stop
    assert [rule.should_stop(events(bs, t)) for bs, t in ((1, 1e6), (2, 1e6), (4, 4e6), (8, 8e6))] == [
        False,
        False,
        False,
        True,
    ]
    copy.deepcopy(rule)  # strategies (and their profiling config) are deep-copied
    no_backoff = ThroughputSaturatedProfilingStopStrategy(throughput_backoff_limit=0)
    assert [no_backoff.should_stop(events(bs, t)) for bs, t in ((1, 1e6), (2, 4e6))] == [False, True]
    assert not AllSamplesProfilingStopStrategy().should_stop(events(2, 1e9))


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: NumStepsMeasuringStopStrategy(num_steps=0), "num_steps must be a positive integer, got 0"),
        (lambda: NumStepsMeasuringStopStrategy(warmup_samples=-1), "warmup_samples must be a positive integer, got -1"),
        (
            lambda: StableWindowMeasuringStopStrategy(max_cv_ratio=1.5),
            r"max_cv_ratio value must be between 0 and 1 \(0 excluded, 1 included\), got 1.5",
        ),
        (
            lambda: StableWindowMeasuringStopStrategy(window_size=30, max_samples=20),
            "max_samples must be greater than or equal to window_size",
        ),
        (
            lambda: ThroughputSaturatedProfilingStopStrategy(min_throughput_gain_ratio=1.5),
            r"min_throughput_gain_ratio value must be between 0 and 1 \(1 excluded\), got 1.5",
        ),
        (
            lambda: ThroughputSaturatedProfilingStopStrategy(throughput_backoff_limit=-1),
            r"throughput_backoff_limit value must not be negative, got -1\.",
        ),
        (lambda: ProfilingConfig(batch_sizes=[]), "ProfilingConfig.batch_sizes must be positive ints"),
    ],
)
def test_invalid_settings_raise_value_error_naming_the_setting(factory, message):
    with pytest.raises(ValueError, match=message) as info:
        factory()
    assert isinstance(info.value, AITuneUserInputError)


def test_profiling_config_takes_a_generator_and_fills_in_the_rules():
    config = ProfilingConfig(batch_sizes=(2**n for n in range(4)))
    assert config.batch_sizes == [1, 2, 4, 8]
    assert isinstance(config.measuring_strategy, ModelExecutionTimeMeasuringStrategy)
    assert config.measurement_stop_strategy == NumStepsMeasuringStopStrategy(20, 10)
    assert config.profiling_stop_strategy == ThroughputSaturatedProfilingStopStrategy(0.05, 2)
    assert config.to_json_dict()["measurement_stop_strategy"] == {"num_steps": 20, "warmup_samples": 10}


def test_model_execution_time_measurement_is_one_event():
    (event,) = ModelExecutionTimeMeasuringStrategy().do_measurement(
        3, torch.nn.functional.relu, ((torch.ones(3, 4),), {}), model_name="relu", backend_details="eager"
    )
    assert event.batch_size == 3 and event.phase == "inference" and event.execution_time > 0
    assert (event.model_name, event.backend_details) == ("relu", "eager")
