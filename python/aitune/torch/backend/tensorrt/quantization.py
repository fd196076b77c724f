"""Quantization through NVIDIA ModelOpt (docs/reference/tensorrt.md) and its calibration data."""

from __future__ import annotations

import copy
import importlib
import inspect
import logging
from pathlib import Path
from typing import Any, Callable

import torch

from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend.tensorrt.tensorrt_config import (
    ONNXAutoCastConfig,
    ONNXQuantizationConfig,
    TorchQuantizationConfig,
)

logger = logging.getLogger("aitune")

MODELOPT_PACKAGE = "nvidia-modelopt[onnx]"


def import_modelopt(submodule: str) -> Any:
    """modelopt.<submodule>, or an error naming the pip package."""
    try:
        return importlib.import_module(f"modelopt.{submodule}")
    except ImportError as e:
        raise BackendUnavailableError(
            f"nvidia-modelopt is not installed. Please install `{MODELOPT_PACKAGE}` (needed for the TensorRT "
            f"quantization_config; import of modelopt.{submodule} failed: {e})"
        ) from e


def calibration_data(
    samples: list[list[torch.Tensor]], names: list[str | None], batch_axes: list[int | None]
) -> dict[str, Any]:
    """{onnx input name: numpy array}: the stored samples (tensor inputs in graph order) whose
    non-batch shapes match the largest sample's, concatenated along each input's batch axis."""
    if not samples:
        return {}
    if len(samples) == 1:
        logger.info(
            "TensorRT quantization calibrates on the single stored sample; raise "
            "aitune.torch.config.max_num_samples_stored to calibrate on more"
        )

    def size(sample: list[torch.Tensor]) -> int:
        return sum(t.numel() for t in sample)

    def non_batch(sample: list[torch.Tensor]) -> list[list[int]]:
        return [[d for a, d in enumerate(t.shape) if a != axis] for t, axis in zip(sample, batch_axes)]

    largest = max(samples, key=size)
    kept = [s for s in samples if non_batch(s) == non_batch(largest)]
    data = {}
    for i, name in enumerate(names):
        if name is None:
            continue
        axis = batch_axes[i]
        parts = [s[i].detach().cpu() for s in kept]
        joined = torch.cat(parts, dim=axis) if axis is not None and len(parts) > 1 else parts[0]
        if joined.dtype == torch.bfloat16:
            joined = joined.float()  # numpy has no bfloat16
        data[name] = joined.numpy()
    return data


def _accepted(func: Callable, **kwargs: object) -> dict[str, Any]:
    """The keyword arguments `func` takes (ModelOpt's signatures change between versions)."""
    params = inspect.signature(func).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def onnx_autocast(cfg: ONNXAutoCastConfig, onnx_path: Path, out_path: Path, calib: dict[str, Any]) -> Path:
    autocast = import_modelopt("onnx.autocast")
    import numpy as np
    import onnx

    calib_file = None
    if calib:
        calib_file = out_path.parent / "calibration.npz"
        out_path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(calib_file, **calib)
    kwargs = _accepted(
        autocast.convert_to_mixed_precision,
        onnx_path=str(onnx_path),
        low_precision_type=cfg.precision,
        keep_io_types=cfg.keep_io_types,
        calibration_data=str(calib_file) if calib_file else None,
    )
    model = autocast.convert_to_mixed_precision(**kwargs)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out_path), save_as_external_data=model.ByteSize() > 2**31 - 1)
    return out_path


def onnx_quantize(cfg: ONNXQuantizationConfig, onnx_path: Path, out_path: Path, calib: dict[str, Any]) -> Path:
    quantization = import_modelopt("onnx.quantization")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    kwargs = {
        "onnx_path": str(onnx_path),
        "quantize_mode": cfg.precision,
        "calibration_data": calib or None,
        "output_path": str(out_path),
    }
    if cfg.calibration_method is not None:
        kwargs["calibration_method"] = cfg.calibration_method
    quantization.quantize(**_accepted(quantization.quantize, **kwargs))
    if cfg.use_model_opt_post_processing:
        import onnx

        exporter = import_modelopt("onnx.export")
        model = exporter.NVFP4QuantExporter.process_model(onnx.load(str(out_path)))
        onnx.save(model, str(out_path))
    return out_path


def torch_quantize(cfg: TorchQuantizationConfig, module: torch.nn.Module, forward_samples: Callable) -> torch.nn.Module:
    """ModelOpt PTQ of a deep copy of `module`; `forward_samples(model)` runs the stored samples
    through it (the calibration loop)."""
    mtq = import_modelopt("torch.quantization")
    preset = getattr(mtq, cfg.quantization_config, None)
    if preset is None:
        hint = " (needs nvidia-modelopt >= 0.35)" if cfg.quantization_config == "NVFP4_FP8_MHA_CONFIG" else ""
        raise BackendUnavailableError(
            f"The installed nvidia-modelopt has no preset {cfg.quantization_config}{hint}. Please install a newer "
            f"`{MODELOPT_PACKAGE}`."
        )
    model = copy.deepcopy(module).to(cfg.device)
    return mtq.quantize(model, preset, forward_samples)
