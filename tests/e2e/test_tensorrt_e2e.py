"""A whole tune -> serve -> save -> load cycle through TensorRTBackend on the CPU, with the fake
`tensorrt` in its computing mode (it runs the exported ONNX in onnxruntime at the addresses aitune
binds). Proves the glue end to end: profiles reach the dispatcher's hard range (ProfileShapeError
before running), outputs match eager, the checkpoint carries the plan and its profiles, and the
C++ runtime says a TensorRT plan needs a build with TensorRT."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import fake_tensorrt as fake
import pytest
import torch

import aitune.torch as ait
import aitune.torch.backend.tensorrt.tensorrt_backend as trt_backend
from aitune.exceptions import ProfileShapeError
from aitune.torch.backend.tensorrt import ProfileMode, TensorRTBackend, TensorRTBackendConfig, TensorRTProfile
from aitune.torch.config import config
from support import aitune_cli


class Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(6, 3)

    def forward(self, x, options):
        return {"scores": self.linear(x) * options["scale"], "mask": options["scale"] > 0}


def _head() -> Head:
    torch.manual_seed(0)
    return Head().eval()


@pytest.fixture
def cpu_trt(monkeypatch):
    """The fake tensorrt computing on the CPU, and TensorRTBackend allowed on the CPU for this test."""
    fake.reset(ort=True)
    monkeypatch.setattr(trt_backend, "_import_tensorrt", fake.as_module)
    monkeypatch.setattr(TensorRTBackend, "_devices", ("cpu", "cuda"))
    return fake


def _sample(batch: int) -> tuple:
    return torch.randn(batch, 6), {"scale": torch.rand(batch, 3) + 0.5}


def _tune(backend: TensorRTBackend) -> ait.Module:
    strategy = ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)
    m = ait.Module(_head(), "head", strategy=strategy)
    items = [(torch.randn(6), {"scale": torch.rand(3) + 0.5}) for _ in range(4)]
    ait.tune(m, items, batch_sizes=[1, 2, 4], device="cpu")
    return m


def _find_steps(node):
    """Every telemetry build step, wherever the report nests it."""
    if isinstance(node, dict):
        if "steps" in node and isinstance(node["steps"], list):
            yield from node["steps"]
        for value in node.values():
            yield from _find_steps(value)
    elif isinstance(node, list):
        for value in node:
            yield from _find_steps(value)


def _check_matches_eager(m: ait.Module, batch: int) -> None:
    x, options = _sample(batch)
    out = m(x, options)
    ref = _head()(x, options)
    assert set(out) == {"scores", "mask"} and out["mask"].dtype == torch.bool
    torch.testing.assert_close(out["scores"], ref["scores"], rtol=1e-5, atol=1e-5)


def test_tune_serve_and_hard_range(cpu_trt):
    m = _tune(TensorRTBackend())
    report = json.loads(Path(config.tuning_data_output_path).read_text())
    steps = [s["name"] for s in _find_steps(report)]
    assert {"tensorrt_onnx_export", "tensorrt_engine_build"} <= set(steps)
    _check_matches_eager(m, 2)
    _check_matches_eager(m, 4)
    with pytest.raises(
        ProfileShapeError,
        match=r"^Input shape \[8, 6\] exceeds max profile shape \[4, 6\] for input "
        r"'x' \(tensor 'input_x'",
    ):
        m(*_sample(8))


def test_samples_used_and_custom_profiles_serve(cpu_trt):
    config.max_num_samples_stored = 10
    m = _tune(TensorRTBackend(TensorRTBackendConfig(profiles=ProfileMode.SAMPLES_USED)))
    _check_matches_eager(m, 2)
    with pytest.raises(ProfileShapeError, match="No TensorRT optimization profile matches the input shapes"):
        m(*_sample(3))  # inside the envelope [1, 4], but no static profile has batch 3
    from aitune.torch import module_registry

    module_registry.clear()
    custom = (
        TensorRTProfile()
        .add_input_shape("x", (1, 6), (4, 6), (16, 6))
        .add_input_shape('options["scale"]', (1, 3), (4, 3), (16, 3))
    )
    m = _tune(TensorRTBackend(TensorRTBackendConfig(profiles=[custom])))
    _check_matches_eager(m, 16)


def _cli() -> str:
    return aitune_cli()


def test_checkpoint_round_trip_and_cpp_runtime_message(cpu_trt, tmp_path):
    m = _tune(TensorRTBackend())
    path = ait.save(m, tmp_path / "trt.ait")
    from aitune._native import _C

    manifest = json.loads(_C.ArchiveReader(str(path)).manifest())
    backend = manifest["modules"][0]["graphs"][0]["backend"]
    assert set(backend["artifacts"]) == {"plan", "optimization_profiles", "io"}
    assert any(f["path"].endswith("tensorrt/model.plan") for f in manifest["files"])
    assert any(f["path"].endswith("tensorrt/model_optimization_profiles.json") for f in manifest["files"])

    target = _head().to("meta")
    loaded = ait.load(target, path)
    _check_matches_eager(loaded, 3)
    with pytest.raises(ProfileShapeError, match="exceeds max profile shape"):
        loaded(*_sample(8))

    bare = ait.save(m, tmp_path / "bare.ait", include_samples=False)  # the output structure comes with the plan
    _check_matches_eager(ait.load(_head().to("meta"), bare), 2)

    env = dict(os.environ, AITUNE_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([_cli(), "inspect", str(path)], capture_output=True, text=True, env=env, timeout=120)
    text = r.stdout + r.stderr
    assert "running a TensorRT plan from C++ needs aitune built with TensorRT" in text, text
