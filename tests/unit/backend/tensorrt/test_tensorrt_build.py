"""TensorRT builder and runner glue against a recording fake `tensorrt` (docs/reference/tensorrt.md),
fed with a real ONNX export; the settings mapping also against the real module when it imports."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import fake_tensorrt as fake
import pytest
import torch

import aitune.torch as ait
import aitune.torch.backend.tensorrt.tensorrt_backend as trt_backend
from aitune.exceptions import BackendUnavailableError, ProfileShapeError
from aitune.torch.backend.tensorrt import (
    ONNXAutoCastConfig,
    ProfileMode,
    TensorRTBackend,
    TensorRTBackendConfig,
    TensorRTProfile,
)
from aitune.torch.backend.tensorrt import builder as trt_builder
from aitune.torch.backend.tensorrt.engine_runner import aligned_empty
from aitune.torch.backend.tensorrt.quantization import calibration_data
from aitune.torch.config import config
from aitune.torch.global_context import published_batch_size


class Pool(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, input):  # noqa: A002 - the seed guide's parameter name
        return self.conv(input).mean(dim=(2, 3))


@pytest.fixture
def trt(monkeypatch):
    fake.reset()
    monkeypatch.setattr(trt_backend, "_import_tensorrt", fake.as_module)
    return fake


def _graph(shapes):
    m = ait.Module(Pool().eval(), "m")
    with torch.no_grad():
        for s in shapes:
            with published_batch_size(s[0]):
                m(torch.randn(*s))
    return m, m.graph_specs[0]


def _build(config_: TensorRTBackendConfig, tmp_path: Path, shapes=((2, 3, 8, 8), (4, 3, 16, 16))) -> TensorRTBackend:
    """Backend._build on the CPU (the public build() rejects cpu, as it must); the fake engine
    serves it."""
    _, graph = _graph(shapes)
    backend = TensorRTBackend(config_)
    backend._device = torch.device("cpu")
    backend._graph_spec = graph
    torch.manual_seed(0)
    backend._build(Pool().eval(), graph, graph.samples, torch.device("cpu"), tmp_path)
    return backend


def _calls(name):
    return [c for c in fake.calls if c[0] == name]


def _builder_config():
    return fake.Builder(fake.ILogger()).create_builder_config()  # as in TensorRT: no constructor


def test_builder_settings_map_every_field():
    fake.reset()
    cfg = _builder_config()
    trt_builder.apply_builder_settings(
        fake,
        cfg,
        TensorRTBackendConfig(workspace_size=1 << 30, optimization_level=5, compatibility_level="AMPERE_PLUS"),
    )
    assert fake.calls == [
        ("set_memory_pool_limit", fake.MemoryPoolType.WORKSPACE, 1 << 30),
        ("set", "builder_optimization_level", 5),
        ("set", "hardware_compatibility_level", fake.HardwareCompatibilityLevel.AMPERE_PLUS),
        ("set_flag", fake.BuilderFlag.TF32),
    ]
    fake.reset()
    trt_builder.apply_builder_settings(fake, cfg, TensorRTBackendConfig(enable_tf32=False))
    assert fake.calls == [("clear_flag", fake.BuilderFlag.TF32)]  # None fields leave TensorRT's defaults


def test_builder_settings_against_the_real_tensorrt_module():
    real = pytest.importorskip(
        "tensorrt",
        reason="tensorrt is not installed here (its runtime needs CUDA; "
        "tests/conformance checks the glue against its bindings)",
    )
    builder = real.Builder(real.Logger(real.Logger.WARNING))
    cfg = builder.create_builder_config()
    trt_builder.apply_builder_settings(
        real, cfg, TensorRTBackendConfig(workspace_size=1 << 28, optimization_level=1, enable_tf32=False)
    )
    assert cfg.get_memory_pool_limit(real.MemoryPoolType.WORKSPACE) == 1 << 28
    assert cfg.builder_optimization_level == 1 and not cfg.get_flag(real.BuilderFlag.TF32)


def test_build_exports_real_onnx_and_builds_strongly_typed_with_profiles(trt, tmp_path):
    backend = _build(TensorRTBackendConfig(timing_cache=tmp_path / "tc.bin"), tmp_path)
    assert (tmp_path / "onnx" / "model.onnx").is_file()
    assert _calls("create_network") == [("create_network", 1 << int(fake.NetworkDefinitionCreationFlag.STRONGLY_TYPED))]
    assert _calls("set_shape") == [("set_shape", "input_input", (2, 3, 8, 8), (4, 3, 16, 16), (4, 3, 16, 16))]
    assert (tmp_path / "tensorrt" / "model.plan").is_file()
    assert json.loads((tmp_path / "tensorrt" / "model_optimization_profiles.json").read_text()) == {
        "input_input": [[[2, 3, 8, 8], [4, 3, 16, 16], [4, 3, 16, 16]]]
    }
    assert backend.input_profile() == [([2, 3, 8, 8], [4, 3, 16, 16])]
    assert set(backend.to_dict()) >= {"plan", "optimization_profiles", "io"}
    assert backend.step_times_s.keys() >= {"onnx_export", "engine_build"}


def test_runner_binds_inputs_without_copies_and_selects_profiles(trt, tmp_path):
    config.max_num_samples_stored = 10
    fake.reset(outputs={"output": ((2, 4), "FLOAT")})
    backend = _build(TensorRTBackendConfig(profiles=ProfileMode.SAMPLES_USED), tmp_path)
    assert len(_calls("set_shape")) == 2
    x = aligned_empty((4, 3, 16, 16), torch.float32, torch.device("cpu")).normal_()  # 256-byte aligned
    fake.calls.clear()
    out = backend._infer(x)
    assert out.shape == (2, 4) and out.dtype == torch.float32
    assert ("set_optimization_profile_async", 1, 0) in fake.calls
    assert ("set_tensor_address", "input_input", x.data_ptr()) in fake.calls  # the caller's memory, no copy
    assert ("set_input_shape", "input_input", (4, 3, 16, 16)) in fake.calls
    assert fake.calls[-1] == ("execute_async_v3", 0)
    with pytest.raises(ProfileShapeError, match=r"^No TensorRT optimization profile matches the input shapes"):
        backend._infer(torch.randn(2, 3, 16, 16))
    with pytest.raises(ProfileShapeError, match=r"^Input shape \[8, 3, 16, 16\] exceeds max profile shape"):
        backend._infer(torch.randn(8, 3, 16, 16))


def test_data_dependent_outputs_come_from_the_output_allocator(trt, tmp_path):
    fake.reset(outputs={"output": ((-1,), "FLOAT")}, data_dependent_shape=(5,))
    backend = _build(TensorRTBackendConfig(), tmp_path)
    out = backend._infer(torch.randn(3, 3, 8, 8))
    assert out.shape == (5,) and ("set_output_allocator", "output") in fake.calls


def test_custom_profiles_by_access_path(trt, tmp_path):
    profile = TensorRTProfile().add_input_shape("input", (1, 3, 8, 8), (2, 3, 8, 8), (8, 3, 32, 32))
    _build(TensorRTBackendConfig(profiles=[profile]), tmp_path)
    assert _calls("set_shape") == [("set_shape", "input_input", (1, 3, 8, 8), (2, 3, 8, 8), (8, 3, 32, 32))]


def test_timing_cache_loaded_and_written_back(trt, tmp_path):
    cache = tmp_path / "tc.bin"
    cache.write_bytes(b"old")
    _build(TensorRTBackendConfig(timing_cache=cache), tmp_path / "b1")
    assert ("create_timing_cache", b"old") in fake.calls
    assert cache.read_bytes() == b"old+merged"
    assert not list(tmp_path.glob("tc.bin.*.tmp"))  # the temporary file was renamed into place


def test_rejected_timing_cache_warns_builds_without_and_is_untouched(trt, tmp_path, caplog):
    fake.reset(reject_cache=True)
    cache = tmp_path / "tc.bin"
    cache.write_bytes(b"foreign")
    with caplog.at_level(logging.WARNING, logger="aitune"):
        logging.getLogger("aitune").addHandler(caplog.handler)
        try:
            _build(TensorRTBackendConfig(timing_cache=cache), tmp_path / "b")
        finally:
            logging.getLogger("aitune").removeHandler(caplog.handler)
    assert "TensorRT rejected the timing cache" in caplog.text
    assert cache.read_bytes() == b"foreign"
    assert ("set_timing_cache", b"", False) in fake.calls  # built with an empty cache instead


def test_default_timing_cache_path_and_switch(monkeypatch, tmp_path):
    assert (
        trt_builder.default_timing_cache_path(fake, tmp_path, "90")
        == tmp_path / "tensorrt" / f"timing_cache_sm90_trt{fake.__version__}.bin"
    )
    monkeypatch.setenv("AITUNE_TRT_TIMING_CACHE", "0")
    assert trt_builder.default_timing_cache_path(fake, tmp_path, "90") is None


def test_parse_errors_are_listed(trt, tmp_path):
    fake.reset(parse_errors=["In node 3 (Conv): unsupported attribute", "In node 7: bad type"])
    with pytest.raises(RuntimeError) as info:
        _build(TensorRTBackendConfig(), tmp_path)
    assert "TensorRT could not parse" in str(info.value)
    assert "  - In node 3 (Conv): unsupported attribute\n  - In node 7: bad type" in str(info.value)


def test_build_failure_quotes_trt_errors_with_workspace_hint(trt, tmp_path, caplog):
    fake.reset(build_fails_with=["Could not find any implementation for node conv1 due to insufficient workspace"])
    with caplog.at_level(logging.ERROR, logger="tensorrt"), pytest.raises(RuntimeError) as info:
        _build(TensorRTBackendConfig(), tmp_path)
    message = str(info.value)
    assert trt_builder.WORKSPACE_HINT in message and "Could not find any implementation for node conv1" in message
    assert trt_builder.WORKSPACE_HINT == (
        "(this often means the builder ran out of workspace/GPU memory; try a "
        "smaller workspace_size or free GPU memory)"
    )
    assert "[TRT] Could not find any implementation" in caplog.text  # TensorRT's log, on the `tensorrt` logger
    assert not (tmp_path / "tensorrt").exists()  # the failed step's partial output is removed


def test_quantization_without_modelopt_names_the_package(trt, tmp_path, monkeypatch):
    import importlib

    real_import = importlib.import_module

    def no_modelopt(name, *args):
        if name.startswith("modelopt"):
            raise ImportError(f"No module named '{name}'")
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_modelopt)
    with pytest.raises(BackendUnavailableError, match=r"nvidia-modelopt\[onnx\]"):
        _build(TensorRTBackendConfig(quantization_config=ONNXAutoCastConfig(precision="fp16")), tmp_path)


def test_calibration_keeps_samples_matching_the_largest_and_concatenates_on_batch():
    samples = [[torch.ones(2, 3, 8, 8)], [torch.ones(4, 3, 8, 8)], [torch.ones(1, 3, 4, 4)]]
    data = calibration_data(samples, ["input_input"], [0])
    assert list(data) == ["input_input"] and data["input_input"].shape == (6, 3, 8, 8)


def test_checkpoint_artifacts_load_back_into_a_runner(trt, tmp_path):
    fake.reset(outputs={"output": ((2, 4), "FLOAT")})
    built = _build(TensorRTBackendConfig(), tmp_path)
    data = built.to_dict()
    artifacts = {k: data[k].path for k in ("plan", "optimization_profiles", "io")}
    loaded = TensorRTBackend.restore(TensorRTBackendConfig(), artifacts, built._graph_spec, "cpu")
    assert loaded.is_active and loaded.input_profile() == built.input_profile()
    assert loaded._infer(torch.randn(3, 3, 8, 8)).shape == (2, 4)


def test_checkpoint_fingerprint_fields_follow_the_plan():
    from aitune.torch.checkpoint.fingerprint import mismatches

    assert TensorRTBackend().requirements() == ["tensorrt", "cuda_major", "gpu_sm"]
    portable = TensorRTBackend(TensorRTBackendConfig(compatibility_level="AMPERE_PLUS"))
    requires = portable.requirements()
    saved = {"tensorrt": "10.9.0", "cuda_runtime": "12.8", "gpu_sm": "9.0", "torch": "2.11.0"}
    ampere = dict(saved, gpu_sm="8.6", torch="2.12.0")
    assert mismatches(saved, ampere, requires, "ctx") == []  # torch is not part of a plan's fingerprint
    assert mismatches(saved, dict(saved, gpu_sm="7.5"), requires, "ctx") == [("gpu_sm", "9.0", "7.5", "ctx")]
    assert mismatches(saved, ampere, TensorRTBackend().requirements(), "ctx") == [("gpu_sm", "9.0", "8.6", "ctx")]
    assert mismatches(saved, dict(saved, tensorrt="10.3.0"), requires, "ctx") == [
        ("tensorrt", "10.9.0", "10.3.0", "ctx")
    ]


def test_engine_io_types_are_converted_to_and_from_the_model(trt, tmp_path):
    """An autocast engine with keep_io_types=False takes and returns fp16: inputs are cast for it
    and outputs come back in eager's dtype."""
    fake.reset(outputs={"output": ((2, 4), "HALF")})
    backend = _build(TensorRTBackendConfig(), tmp_path)
    backend._runner._input_dtypes["input_input"] = torch.float16
    x = torch.randn(3, 3, 8, 8)
    fake.calls.clear()
    out = backend._infer(x)
    assert out.dtype == torch.float32
    address = next(c[2] for c in fake.calls if c[:2] == ("set_tensor_address", "input_input"))
    assert address != x.data_ptr()  # a converted copy, not the caller's float32 memory
