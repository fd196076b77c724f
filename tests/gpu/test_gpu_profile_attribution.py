"""ait.profile on CUDA, as AITune's functional test 039 drives it: three wrapped blocks tuned with
TorchEagerBackend, keyword inputs, an inference function, a trace file. Every run and every
region gets a device time from the kernels launched while it ran, each region's device fraction
lies in (0, 1], and the Markdown's "## Per-Run Attribution" shows them (docs/guide.md,
"Profiling a call")."""

from __future__ import annotations

import json

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.module_registry import MODULE_REGISTRY

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


class CudaBlock(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        return torch.relu(self.norm(self.linear(x)))


class ThreeBlocks:
    def __init__(self, width: int) -> None:
        def wrapped(name: str):
            strategy = ait.OneBackendStrategy(TorchEagerBackend()).enable_find_max_batch_size(False)
            return ait.Module(CudaBlock(width).cuda().eval(), name, strategy=strategy)

        self.blocks = [wrapped(f"cuda-block-{i}") for i in (1, 2, 3)]

    def __call__(self, x, scale):
        for block in self.blocks:
            x = block(x)
        return x * scale


def test_profile_on_cuda_attributes_device_time_to_every_region(tmp_path):
    MODULE_REGISTRY.clear()
    try:
        pipeline = ThreeBlocks(64)
        inputs = {"x": torch.randn(16, 64, device="cuda"), "scale": torch.tensor(1.25, device="cuda")}
        with torch.inference_mode():
            pipeline(**inputs)
        for block in pipeline.blocks:
            block.tune(device="cuda")
            assert block.state.value == "tuned"

        def inference_function(**kwargs):
            with torch.inference_mode():
                return pipeline(**kwargs)

        result = ait.profile(
            pipeline,
            inputs,
            inference_function=inference_function,
            warmup_runs=1,
            measured_runs=3,
            trace_file=tmp_path / "trace.json",
        )
    finally:
        MODULE_REGISTRY.clear()
    report = json.loads(json.dumps(result.data))
    expected = {f"aot_module:cuda-block-{i}" for i in (1, 2, 3)}
    assert report["profiler"]["activities"] == ["CPU", "CUDA"]
    assert "device_time_total" in report["profiler"]["key_averages"]
    assert {r["id"] for r in report["regions"]} == expected and report["warnings"] == []
    assert len(report["runs"]) == 3
    for run in report["runs"]:
        assert run["timing"]["device_time_us"] > 0
        assert {r["region_id"] for r in run["regions"]} == expected
        for region in run["regions"]:
            assert region["calls"] == 1 and region["cpu_time_us"] > 0
            assert region["device_time_us"] > 0, region
            assert 0 < region["device_time_fraction"] <= 1, region
        share = sum(r["device_time_fraction"] for r in run["regions"]) + run["residual"]["device_time_fraction"]
        assert share == pytest.approx(1.0, abs=1e-6)
    markdown = result.markdown()
    assert "## Per-Run Attribution" in markdown and "Device Fraction" in markdown
    assert all(f"`{region_id}`" in markdown for region_id in expected)
    trace = result.trace_file.read_text()
    assert all(f"aitune.performance.aot_module:cuda-block-{i}" in trace for i in (1, 2, 3))
