"""The ModelOpt steps of the TensorRT pipeline (docs/reference/tensorrt.md) against a recording fake of
`modelopt` (the real package needs CUDA wheels not installable here): which ModelOpt call each
quantization config makes, with which arguments and calibration data, and where its ONNX lands."""

from __future__ import annotations

import shutil
import sys
import types

import fake_tensorrt as fake
import numpy as np
import pytest
import torch
from .test_tensorrt_build import _build

import aitune.torch.backend.tensorrt.tensorrt_backend as trt_backend
from aitune.torch.backend.tensorrt import (
    ONNXAutoCastConfig,
    ONNXQuantizationConfig,
    TensorRTBackendConfig,
    TorchQuantizationConfig,
)
from aitune.torch.config import config


@pytest.fixture
def modelopt(monkeypatch):
    """Installs fake modelopt.onnx.autocast / .onnx.quantization / .torch.quantization."""
    calls: list[tuple] = []

    def convert_to_mixed_precision(onnx_path, low_precision_type="fp16", keep_io_types=False, calibration_data=None):
        import onnx

        calls.append(("autocast", low_precision_type, keep_io_types, dict(np.load(calibration_data))))
        return onnx.load(onnx_path)

    def quantize(onnx_path, quantize_mode="int8", calibration_data=None, calibration_method=None, output_path=None):
        calls.append(("onnx_ptq", quantize_mode, calibration_method, {k: v.shape for k, v in calibration_data.items()}))
        shutil.copy(onnx_path, output_path)

    def torch_quantize(model, preset, forward_loop):
        calls.append(("torch_ptq", preset))
        forward_loop(model)
        return model

    modules = {
        "modelopt": types.ModuleType("modelopt"),
        "modelopt.onnx": types.ModuleType("modelopt.onnx"),
        "modelopt.onnx.autocast": types.SimpleNamespace(convert_to_mixed_precision=convert_to_mixed_precision),
        "modelopt.onnx.quantization": types.SimpleNamespace(quantize=quantize),
        "modelopt.torch": types.ModuleType("modelopt.torch"),
        "modelopt.torch.quantization": types.SimpleNamespace(
            quantize=torch_quantize, FP8_DEFAULT_CFG={"fp8": True}, INT8_DEFAULT_CFG={"int8": True}
        ),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return calls


@pytest.fixture
def trt(monkeypatch):
    fake.reset()
    monkeypatch.setattr(trt_backend, "_import_tensorrt", fake.as_module)
    return fake


def _parsed() -> str:
    return [c for c in fake.calls if c[0] == "parse_from_file"][-1][1]


def test_autocast_runs_modelopt_on_the_export_with_calibration_data(trt, modelopt, tmp_path):
    config.max_num_samples_stored = 10
    _build(
        TensorRTBackendConfig(quantization_config=ONNXAutoCastConfig(precision="bf16", keep_io_types=False)),
        tmp_path,
        shapes=((2, 3, 8, 8), (4, 3, 8, 8), (1, 3, 32, 32)),
    )
    ((name, precision, keep_io, calib),) = modelopt
    assert (name, precision, keep_io) == ("autocast", "bf16", False)
    # The samples matching the largest one's non-batch shape (32x32: only the last), on the batch axis.
    assert {k: v.shape for k, v in calib.items()} == {"input_input": (1, 3, 32, 32)}
    assert _parsed() == str(tmp_path / "onnx_autocast" / "model.onnx")


def test_onnx_ptq_passes_precision_method_and_concatenated_samples(trt, modelopt, tmp_path):
    config.max_num_samples_stored = 10
    _build(
        TensorRTBackendConfig(
            quantization_config=ONNXQuantizationConfig(precision="int8", calibration_method="entropy")
        ),
        tmp_path,
        shapes=((2, 3, 8, 8), (4, 3, 8, 8)),
    )
    assert modelopt == [("onnx_ptq", "int8", "entropy", {"input_input": (6, 3, 8, 8)})]
    assert _parsed() == str(tmp_path / "onnx_ptq" / "model.onnx")


def test_torch_ptq_quantizes_a_copy_calibrates_on_the_samples_and_exports_it(trt, modelopt, tmp_path):
    _build(
        TensorRTBackendConfig(quantization_config=TorchQuantizationConfig("INT8_DEFAULT_CFG", device="cpu")), tmp_path
    )
    assert modelopt == [("torch_ptq", {"int8": True})]
    assert (tmp_path / "onnx_ptq" / "model.onnx").is_file() and not (tmp_path / "onnx").exists()
    assert _parsed() == str(tmp_path / "onnx_ptq" / "model.onnx")


def test_missing_preset_names_the_package(trt, modelopt, tmp_path):
    from aitune.exceptions import BackendUnavailableError

    with pytest.raises(BackendUnavailableError, match=r"needs nvidia-modelopt >= 0.35.*nvidia-modelopt\[onnx\]"):
        _build(
            TensorRTBackendConfig(quantization_config=TorchQuantizationConfig("NVFP4_FP8_MHA_CONFIG", device="cpu")),
            tmp_path,
        )
    assert torch.is_grad_enabled()


def test_single_sample_calibration_suggests_storing_more(aitune_log):
    from aitune.torch.backend.tensorrt.quantization import calibration_data

    data = calibration_data([[torch.ones(2, 4)]], ["input_x"], [0])
    assert data["input_x"].shape == (2, 4)
    assert "raise aitune.torch.config.max_num_samples_stored" in aitune_log.text
