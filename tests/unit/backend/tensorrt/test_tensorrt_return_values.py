"""TensorRT reports refusals through return values (False from the context's setters, -1 from
add_optimization_profile), not exceptions; aitune checks every one it gets (docs/guide.md,
TensorRT backend). A refusal is simulated the way TensorRT documents it, either by a plan and a
profiles file that do not match (a hostile or mixed-up checkpoint) or by the fake's method
answering as TensorRT does."""

from __future__ import annotations

import json

import fake_tensorrt as fake
import pytest
import torch
from .test_tensorrt_build import _build

import aitune.torch.backend.tensorrt.tensorrt_backend as trt_backend
from aitune.torch.backend.tensorrt import ProfileMode, TensorRTBackend, TensorRTBackendConfig
from aitune.torch.config import config


@pytest.fixture
def trt(monkeypatch):
    fake.reset(outputs={"output": ((2, 4), "FLOAT")})
    monkeypatch.setattr(trt_backend, "_import_tensorrt", fake.as_module)
    return fake


def _loaded(built: TensorRTBackend, edit_profiles=None) -> TensorRTBackend:
    """The built backend loaded back from its artifacts, after `edit_profiles` changed the saved
    profiles file."""
    data = built.to_dict()
    artifacts = {k: data[k].path for k in ("plan", "optimization_profiles", "io")}
    if edit_profiles is not None:
        path = artifacts["optimization_profiles"]
        path.write_text(json.dumps(edit_profiles(json.loads(path.read_text()))))
    return TensorRTBackend.restore(TensorRTBackendConfig(), artifacts, built._graph_spec, "cpu")


def _calls(name):
    return [c for c in fake.calls if c[0] == name]


def test_a_refused_profile_switch_raises_and_is_tried_again_on_the_next_call(trt, tmp_path, monkeypatch):
    config.max_num_samples_stored = 10
    backend = _build(TensorRTBackendConfig(profiles=ProfileMode.SAMPLES_USED), tmp_path)
    accepts = fake.IExecutionContext.set_optimization_profile_async
    monkeypatch.setattr(fake.IExecutionContext, "set_optimization_profile_async", lambda self, i, s: False)
    x = torch.randn(4, 3, 16, 16)  # the second profile's shape
    with pytest.raises(
        RuntimeError,
        match=r"refused to switch to optimization profile 1 "
        r"\(set_optimization_profile_async returned False\)",
    ):
        backend._infer(x)
    monkeypatch.setattr(fake.IExecutionContext, "set_optimization_profile_async", accepts)
    fake.calls.clear()
    assert backend._infer(x).shape == (2, 4)
    assert _calls("set_optimization_profile_async") == [("set_optimization_profile_async", 1, 0)]  # not stale


def test_a_plan_with_fewer_profiles_than_its_profiles_file_is_refused_on_load(trt, tmp_path):
    built = _build(TensorRTBackendConfig(), tmp_path)

    def two_profiles(saved):
        return {name: ranges * 2 for name, ranges in saved.items()}

    with pytest.raises(RuntimeError, match=r"plan has 1 optimization profile\(s\) but its profiles file lists 2"):
        _loaded(built, two_profiles)


def test_a_refused_input_shape_names_the_input_the_shape_and_the_profile(trt, tmp_path):
    built = _build(TensorRTBackendConfig(), tmp_path)  # the engine's profile: [2, 3, 8, 8] to [4, 3, 16, 16]

    def wider(saved):
        return {name: [[low, opt, [8, 3, 16, 16]] for low, opt, _ in ranges] for name, ranges in saved.items()}

    loaded = _loaded(built, wider)
    with pytest.raises(RuntimeError) as info:
        loaded._infer(torch.randn(8, 3, 16, 16))
    assert str(info.value) == (
        "TensorRT refused input shape [8, 3, 16, 16] for engine input 'input_input' (input) in optimization profile 0 "
        "(set_input_shape returned False); aitune's profile allows [2, 3, 8, 8] to [8, 3, 16, 16]: the plan and its "
        "profiles do not match"
    )


def test_a_refused_tensor_address_raises(trt, tmp_path, monkeypatch):
    backend = _build(TensorRTBackendConfig(), tmp_path)
    monkeypatch.setattr(fake.IExecutionContext, "set_tensor_address", lambda self, name, memory: False)
    with pytest.raises(
        RuntimeError,
        match=r"refused the address 0x[0-9a-f]+ for engine tensor 'input_input' "
        r"\(set_tensor_address returned False\)",
    ):
        backend._infer(torch.randn(3, 3, 8, 8))


def test_a_refused_optimization_profile_fails_the_build(trt, tmp_path, monkeypatch):
    monkeypatch.setattr(fake.IBuilderConfig, "add_optimization_profile", lambda self, profile: -1)
    with pytest.raises(RuntimeError) as info:
        _build(TensorRTBackendConfig(), tmp_path)
    assert (
        "TensorRT refused optimization profile 0 (input_input: min=[2, 3, 8, 8], opt=[4, 3, 16, 16], "
        "max=[4, 3, 16, 16]): add_optimization_profile returned -1, expected 0"
    ) in str(info.value)


def test_a_failed_execution_quotes_tensorrt(trt, tmp_path, monkeypatch):
    backend = _build(TensorRTBackendConfig(), tmp_path)

    def fails(self, stream_handle):
        self._fake_engine._fake_logger.log(fake.ILogger.Severity.ERROR, "enqueue: illegal memory access")
        return False

    monkeypatch.setattr(fake.IExecutionContext, "execute_async_v3", fails)
    with pytest.raises(RuntimeError, match=r"execute_async_v3 returned False\): enqueue: illegal memory access"):
        backend._infer(torch.randn(3, 3, 8, 8))
