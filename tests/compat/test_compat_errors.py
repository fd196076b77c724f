"""Errors as AITune's users catch them: where AITune raises a builtin, aitune's error is caught by an
`except` for that builtin and its message holds the words AITune's own tests match on, while
staying aitune's (what failed, what was expected, what came); docs/reference/errors.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune.exceptions import AITuneUserInputError, CorruptCheckpointError, UnsupportedCheckpointError
from aitune.torch.backend import ArtifactPath, TorchEagerBackend
from aitune.torch.module_registry import MODULE_REGISTRY


@pytest.fixture(autouse=True)
def _empty_registry():
    MODULE_REGISTRY.clear()
    yield
    MODULE_REGISTRY.clear()


def _strategy():
    return ait.OneBackendStrategy(TorchEagerBackend()).enable_find_max_batch_size(False)


class Identity(torch.nn.Module):
    def forward(self, x, a=None, b=None):
        return x


def test_inspect_of_something_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match="'NoneType' object is not callable") as info:
        ait.inspect(None, torch.randn(10, 10))
    assert isinstance(info.value, AITuneUserInputError) and "inference_function" in str(info.value)


def test_an_empty_dataset_is_a_value_error():
    with pytest.raises(ValueError, match="Dataset is empty") as info:
        ait.inspect(torch.nn.Linear(2, 2), [])
    assert isinstance(info.value, AITuneUserInputError)
    with pytest.raises(ValueError, match="Dataset is empty"):
        ait.tune(lambda x: x, [], device="cpu")


def test_a_dataset_that_is_neither_indexable_nor_iterable_is_a_type_error():
    from aitune.torch.dataloader import samples_generator

    with pytest.raises(TypeError, match="not indexable or iterable"):
        list(samples_generator(object(), [1]))


def test_get_modules_ratio_outside_zero_one():
    info = ait.inspect(torch.nn.Linear(2, 2), [torch.randn(2)], number_of_iterations=1, warmup_iterations=0)
    with pytest.raises(ValueError, match="value must be between 0 and 1"):
        info.get_modules(min_execution_ratio=1.01)


def test_too_few_strategies_and_a_missing_strategy_are_runtime_errors():
    module = ait.Module(Identity(), "few", strategies=[_strategy()])
    module(torch.ones(1))
    module(torch.ones(1, 2))
    with pytest.raises(
        RuntimeError, match=re.escape("Not enough strategies for multi-graph. Expected at least 2, got 1.")
    ):
        module.tune(device="cpu")
    MODULE_REGISTRY.clear()
    module = ait.Module(Identity(), "missing", strategies={"0": _strategy()})
    module(torch.ones(1))
    module(torch.ones(1, 2))
    with pytest.raises(RuntimeError, match=r"The are following errors:\nmissing strategy for graph") as info:
        module.tune(device="cpu")
    assert "graph: 1 (Tensors: x: [1, 2] torch.float32)" in str(info.value)


def test_invalid_device_wording():
    with pytest.raises(ValueError, match="Invalid device 'gpu:0'"):
        ait.tune(lambda x: x, [torch.ones(1)], device="gpu:0")


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (
            lambda: __import__("aitune.torch.task.profiling", fromlist=["x"]).ThroughputSaturatedProfilingStopStrategy(
                min_throughput_gain_ratio=-0.01
            ),
            "value must be between 0 and 1",
        ),
        (
            lambda: __import__("aitune.torch.task.profiling", fromlist=["x"]).ThroughputSaturatedProfilingStopStrategy(
                throughput_backoff_limit=-1
            ),
            r"value must not be negative, got -1\.",
        ),
        (
            lambda: __import__("aitune.torch.task.profiling", fromlist=["x"]).StableWindowMeasuringStopStrategy(
                max_cv_ratio=0
            ),
            "value must be between 0 and 1",
        ),
        (
            lambda: __import__("aitune.torch.task.profiling", fromlist=["x"]).StableWindowMeasuringStopStrategy(
                window_size=20, max_samples=10
            ),
            "max_samples must be greater than or equal to window_size",
        ),
        (lambda: ait.LatencyBudgetStrategy(latency_budget_ms=0, backends=[TorchEagerBackend()]), "positive"),
        (
            lambda: ait.backend.TorchInductorJitBackendConfig(mode="default", options={"max_autotune": True}),
            re.escape("Cannot specify both 'mode' and 'options' parameters in config. "),
        ),
        (lambda: ait.PerformanceProfile({}).markdown({"x": 1}), "markdown options are not supported yet"),
        (
            lambda: ait.ModuleFunctionKernelProfiler().profile(torch.nn.Identity(), warmup_iterations=-1),
            "warmup_iterations must be greater than or equal to 0",
        ),
    ],
)
def test_setting_refusals_are_value_errors_with_aitunes_words(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()


def test_artifact_path_refusals(tmp_path: Path):
    with pytest.raises(ValueError, match="must be relative"):
        ArtifactPath(root=tmp_path, relative_path=tmp_path / "model.bin")
    with pytest.raises(ValueError, match="must not escape"):
        ArtifactPath(root=tmp_path, relative_path=Path("../model.bin"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ArtifactPath.from_existing(tmp_path / "model.bin", root=tmp_path)
    (tmp_path / "model.bin").touch()
    with pytest.raises(ValueError, match="outside root"):
        ArtifactPath.from_existing(tmp_path / "model.bin", root=tmp_path / "nested")


def test_damaged_and_unreadable_checkpoints_are_value_errors(tmp_path: Path):
    """AITune raises ValueError for a failed hash check, a path escaping the checkpoint and an
    unknown backend type; aitune's checkpoint errors are ValueErrors too."""
    assert issubclass(CorruptCheckpointError, ValueError) and issubclass(UnsupportedCheckpointError, ValueError)
    bogus = tmp_path / "bogus.ait"
    bogus.write_bytes(b"not a zip archive at all")
    with pytest.raises(ValueError):
        ait.load(torch.nn.Linear(2, 2), bogus)
