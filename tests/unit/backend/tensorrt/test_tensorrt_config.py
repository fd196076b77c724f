"""TensorRTBackendConfig and its parts (docs/reference/tensorrt.md): fields, defaults, validation messages,
identity, serialisation, availability."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

import aitune.torch.backend as backend_pkg
from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend.tensorrt import (
    ONNXAutoCastConfig,
    ONNXQuantizationConfig,
    ProfileMode,
    TensorRTBackend,
    TensorRTBackendConfig,
    TensorRTProfile,
    TorchQuantizationConfig,
)
from aitune.torch.config import config
from aitune.torch.tune_strategy.tune_strategy import availability


def test_fields_and_defaults_match_the_seed():
    fields = {f.name: f.default for f in dataclasses.fields(TensorRTBackendConfig)}
    assert list(fields) == [
        "use_dynamo",
        "workspace_size",
        "opset_version",
        "optimization_level",
        "compatibility_level",
        "timing_cache",
        "profiles",
        "device",
        "quantization_config",
        "enable_tf32",
        "use_cuda_graphs",
    ]
    assert fields == {
        "use_dynamo": True,
        "workspace_size": None,
        "opset_version": None,
        "optimization_level": None,
        "compatibility_level": None,
        "timing_cache": None,
        "profiles": ProfileMode.SINGLE,
        "device": "cuda",
        "quantization_config": None,
        "enable_tf32": True,
        "use_cuda_graphs": False,
    }
    assert [m.name for m in ProfileMode] == ["SINGLE", "SAMPLES_USED"]


def test_group_is_exported_from_both_packages():
    for name in (
        "TensorRTBackend",
        "TensorRTBackendConfig",
        "TensorRTProfile",
        "ProfileMode",
        "ONNXAutoCastConfig",
        "ONNXQuantizationConfig",
        "TorchQuantizationConfig",
    ):
        assert getattr(backend_pkg, name) is getattr(__import__("aitune.torch.backend.tensorrt", fromlist=[name]), name)


def test_validation_messages():
    with pytest.raises(ValueError, match=r"^optimization_level must be an integer between 0 and 5, got 6$"):
        TensorRTBackendConfig(optimization_level=6)
    with pytest.raises(ValueError, match="optimization_level"):
        TensorRTBackendConfig(optimization_level=-1)
    for level in range(6):
        assert TensorRTBackendConfig(optimization_level=level).optimization_level == level
    with pytest.raises(ValueError, match="workspace_size"):
        TensorRTBackendConfig(workspace_size=0)
    with pytest.raises(ValueError, match="compatibility_level must be a trt.HardwareCompatibilityLevel member"):
        TensorRTBackendConfig(compatibility_level="VOLTA_PLUS")
    with pytest.raises(ValueError, match=r"^Unsupported autocast precision 'fp8'"):
        ONNXAutoCastConfig(precision="fp8")
    with pytest.raises(ValueError, match=r"^Unsupported precision 'int16'"):
        ONNXQuantizationConfig(precision="int16")
    with pytest.raises(ValueError, match=r"^Unsupported calibration_method 'minmax'"):
        ONNXQuantizationConfig(precision="int8", calibration_method="minmax")
    with pytest.raises(ValueError, match=r"^Unsupported quantization_config 'FP16_CFG'"):
        TorchQuantizationConfig(quantization_config="FP16_CFG")
    with pytest.raises(ValueError, match="profiles must be a ProfileMode"):
        TensorRTBackendConfig(profiles="dynamic")
    for method in ("max", "entropy", "awq_clip", "awq_lite", "awq_full", "rtn_dq", None):
        ONNXQuantizationConfig(precision="int4", calibration_method=method)
    assert ONNXAutoCastConfig() == ONNXAutoCastConfig(precision="fp16", keep_io_types=True)
    assert TorchQuantizationConfig() == TorchQuantizationConfig("FP8_DEFAULT_CFG", "cuda")


def test_compatibility_level_accepts_member_or_name_and_stores_the_name():
    class _Level:  # a trt.HardwareCompatibilityLevel member as pybind11 exposes it
        name = "AMPERE_PLUS"

    assert TensorRTBackendConfig(compatibility_level=_Level()).compatibility_level == "AMPERE_PLUS"
    assert (
        TensorRTBackendConfig(compatibility_level="SAME_COMPUTE_CAPABILITY").compatibility_level
        == "SAME_COMPUTE_CAPABILITY"
    )


def test_profile_builder_positional_keyword_and_chained():
    p = (
        TensorRTProfile()
        .add_input_shape("input", (1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))
        .add_input_shape(("inputs", "mask"), min_shape=(1, 4), opt_shape=(2, 4), max_shape=(4, 4))
    )
    assert p.inputs == {
        "input": ((1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224)),
        ("inputs", "mask"): ((1, 4), (2, 4), (4, 4)),
    }
    with pytest.raises(ValueError, match=r"min_shape for input 'x' must hold non-negative integers"):
        TensorRTProfile().add_input_shape("x", (1.5, 3), (2, 3), (2, 3))
    with pytest.raises(ValueError, match="must have one rank"):
        TensorRTProfile().add_input_shape("x", (1, 3), (2, 3, 1), (2, 3))


def test_describe_key_and_round_trip():
    assert TensorRTBackend().describe() == "TensorRTBackend()"
    assert TensorRTBackend(TensorRTBackendConfig(use_dynamo=False)).describe() == "TensorRTBackend(use_dynamo=False)"
    a = TensorRTBackend(TensorRTBackendConfig(workspace_size=1 << 30))
    assert a.key().startswith("TensorRTBackend_") and a.key() != TensorRTBackend().key()
    full = TensorRTBackendConfig(
        workspace_size=1 << 30,
        opset_version=17,
        optimization_level=5,
        compatibility_level="AMPERE_PLUS",
        timing_cache=Path("/tmp/cache.bin"),
        profiles=[TensorRTProfile().add_input_shape(("inputs", "x"), (1, 2), (2, 2), (4, 2))],
        quantization_config=ONNXQuantizationConfig(precision="int8", calibration_method="entropy"),
        enable_tf32=False,
        use_cuda_graphs=True,
    )
    data = full.to_dict()
    assert data["profiles"] == [{"inputs": [[["inputs", "x"], [1, 2], [2, 2], [4, 2]]]}]
    assert data["quantization_config"]["type"] == "ONNXQuantizationConfig"
    again = TensorRTBackendConfig.from_dict(data)
    assert again == full and again.key() == full.key()
    samples_used = TensorRTBackendConfig(profiles=ProfileMode.SAMPLES_USED).to_dict()
    assert TensorRTBackendConfig.from_dict(samples_used).profiles is ProfileMode.SAMPLES_USED


def test_samples_used_needs_more_than_one_stored_sample():
    assert config.max_num_samples_stored == 1
    with pytest.raises(ValueError) as info:
        TensorRTBackend(TensorRTBackendConfig(profiles=ProfileMode.SAMPLES_USED))
    assert str(info.value).startswith(
        "aitune.torch.config.max_num_samples_stored is set to 1, change it to number of samples to use for profile "
        "generation."
    )
    config.max_num_samples_stored = 100
    TensorRTBackend(TensorRTBackendConfig(profiles=ProfileMode.SAMPLES_USED))


def test_construction_never_fails_and_availability_names_the_package(monkeypatch):
    import aitune.torch.backend.tensorrt.tensorrt_backend as trt_backend

    def missing():
        raise ImportError("No module named 'tensorrt'")

    monkeypatch.setattr(trt_backend, "_import_tensorrt", missing)
    backend = TensorRTBackend(TensorRTBackendConfig(quantization_config=TorchQuantizationConfig()))
    assert backend.is_available() == (False, "tensorrt is not installed. Please install `tensorrt`.")
    with pytest.raises(BackendUnavailableError, match=r"^tensorrt is not installed. Please install `tensorrt`.$"):
        backend.build(torch.nn.Linear(2, 2), None, [], "cuda", Path("/tmp/unused"))


def test_cpu_device_is_rejected_with_the_spec_reason(monkeypatch, tmp_path):
    import fake_tensorrt

    import aitune.torch.backend.tensorrt.tensorrt_backend as trt_backend

    monkeypatch.setattr(trt_backend, "_import_tensorrt", fake_tensorrt.as_module)
    backend = TensorRTBackend()
    assert backend.is_available() == (True, "")
    reason = "Device cpu is not supported by the backend TensorRTBackend"
    assert availability(backend, torch.device("cpu")) == (False, reason)
    with pytest.raises(BackendUnavailableError, match=r"^Device cpu is not supported by the backend TensorRTBackend$"):
        backend.build(torch.nn.Linear(2, 2), None, [], "cpu", tmp_path)


def test_precision_class_follows_the_spec_table():
    def cls(**fields):
        return TensorRTBackend(TensorRTBackendConfig(**fields)).precision_class

    assert cls() == "tf32" and cls(enable_tf32=False) == "fp32"
    assert cls(quantization_config=ONNXAutoCastConfig(precision="bf16")) == "bf16"
    assert cls(quantization_config=ONNXQuantizationConfig(precision="int8")) == "int8"
    assert cls(quantization_config=ONNXQuantizationConfig(precision="int4")) == "fp8"
    assert cls(quantization_config=TorchQuantizationConfig("INT8_SMOOTHQUANT_CFG")) == "int8"
    assert cls(quantization_config=TorchQuantizationConfig("NVFP4_DEFAULT_CFG")) == "fp8"
