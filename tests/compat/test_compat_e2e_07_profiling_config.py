"""Scenario 7: a strategy measured with a ProfilingConfig assembled from AITune's profiling
modules (a generator of batch sizes, the stable-window rule, the saturation rule), as an AITune
user configures one; invalid settings fail at construction with ValueError."""

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend.torch_eager import TorchEagerBackend
from aitune.torch.task.profiling.config import ProfilingConfig
from aitune.torch.task.profiling.measuring_stop_strategy import StableWindowMeasuringStopStrategy
from aitune.torch.task.profiling.profiling_stop_strategy import ThroughputSaturatedProfilingStopStrategy
from aitune.torch.tune_strategy.max_throughput_strategy import MaxThroughputStrategy


def test_max_throughput_with_a_custom_profiling_config():
    config = ProfilingConfig(
        batch_sizes=(2**n for n in range(4)),
        measurement_stop_strategy=StableWindowMeasuringStopStrategy(
            window_size=5, max_cv_ratio=0.5, warmup_samples=2, max_samples=40
        ),
        profiling_stop_strategy=ThroughputSaturatedProfilingStopStrategy(
            min_throughput_gain_ratio=0.05, throughput_backoff_limit=1
        ),
    )
    assert config.batch_sizes == [1, 2, 4, 8]
    strategy = MaxThroughputStrategy(backends=[TorchEagerBackend()], profiling_config=config)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
    x = torch.randn(5, 32)
    with torch.no_grad():
        expected = model(x)
    module = ait.Module(model, "custom-profiling", strategy=strategy)
    ait.tune(module, [torch.randn(32) for _ in range(8)], batch_sizes=[1, 8], device="cpu")
    (result,) = [r for r in strategy.backend_results if r.get("success")]
    assert result["selected_batch_size"] in (1, 2, 4, 8) and result["throughput"] > 0
    assert strategy.perf_validation_results and strategy.perf_validation_results[0].baseline_metric > 0
    with torch.no_grad():
        torch.testing.assert_close(module(x), expected)


def test_invalid_profiling_settings_fail_when_configured():
    with pytest.raises(ValueError, match="max_cv_ratio"):
        StableWindowMeasuringStopStrategy(max_cv_ratio=0)
    with pytest.raises(ValueError, match="min_throughput_gain_ratio"):
        ThroughputSaturatedProfilingStopStrategy(min_throughput_gain_ratio=-0.1)
    with pytest.raises(ValueError, match="batch_sizes"):
        ProfilingConfig(batch_sizes=[0, 1])
