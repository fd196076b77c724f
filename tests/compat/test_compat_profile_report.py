"""ait.profile's report in AITune's layout: the Markdown carries AITune's sections and columns
(its CUDA profile test looks for "## Per-Run Attribution" and "Device Fraction"), and on CUDA a
region's device time is the kernels launched while it ran (docs/guide.md, "Profiling a call")."""

from __future__ import annotations

import torch
from torch.autograd.profiler_util import FunctionEvent

import aitune.torch as ait
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.module_registry import MODULE_REGISTRY
from aitune.torch.performance.capture import KernelLaunches

SECTIONS = [
    "# Performance Profile",
    "## Runs",
    "## Regions",
    "## Per-Run Attribution",
    "## Profiler Key Averages",
    "### Sorted By CPU Total",
    "## Warnings",
]


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x))


class Pipeline:
    def __init__(self) -> None:
        strategy = ait.OneBackendStrategy(TorchEagerBackend()).enable_find_max_batch_size(False)
        self.first = ait.Module(Block(), "block-1", strategy=strategy)
        self.second = Block()

    def __call__(self, x):
        return self.second(self.first(x))


def test_markdown_has_aitunes_sections_in_order_and_one_attribution_row_per_region_and_run():
    MODULE_REGISTRY.clear()
    try:
        pipeline = Pipeline()
        with torch.no_grad():
            pipeline(torch.randn(2, 8))
        pipeline.first.tune(device="cpu")
        result = ait.profile(pipeline, torch.randn(2, 8), warmup_runs=1, measured_runs=2)
    finally:
        MODULE_REGISTRY.clear()
    markdown = result.markdown()
    positions = [markdown.index(f"\n{s}\n") if i else markdown.index(s) for i, s in enumerate(SECTIONS)]
    assert positions == sorted(positions), markdown
    attribution = markdown.split("## Per-Run Attribution")[1].split("## Profiler Key Averages")[0]
    assert "| Run | Region | Calls | CPU | CPU Fraction | Device | Device Fraction |" in attribution
    rows = [line for line in attribution.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 2 * 3  # per run: two regions and the residual
    assert sum("`aot_module:block-1`" in r for r in rows) == 2 and sum("_(residual)_" in r for r in rows) == 2
    assert "`aot_module:block-1`" in markdown.split("## Regions")[1] and "No warnings." in markdown
    assert "| Name | Device | Count | Self CPU | CPU Total | Self Device | Device Total |" in markdown


def _event(name: str, start_us: float, end_us: float, thread: int = 1, kernels_us: tuple = ()) -> FunctionEvent:
    event = FunctionEvent(id=0, name=name, thread=thread, start_us=start_us, end_us=end_us, use_device="cuda")
    for duration in kernels_us:
        event.append_kernel("kernel", 0, duration)
    return event


def test_kernel_launches_are_counted_by_when_they_were_launched_whichever_thread():
    region = _event("aitune.performance.aot_module:m", 100, 200)
    launches = KernelLaunches(
        [
            region,
            _event("aten::mm", 110, 120, kernels_us=(30.0,)),
            _event("cudaLaunchKernel", 150, 151, thread=7, kernels_us=(5.0, 7.0)),  # the C++ runtime's thread
            _event("aten::add", 250, 260, kernels_us=(40.0,)),  # after the region
            _event("aten::view", 130, 131),  # no device work
        ]
    )
    assert launches.device_us(region) == 42.0
    assert launches.device_us(_event("x", 0, 50)) is None
    assert launches.device_us(_event("run", 0, 300)) == 82.0
    assert not KernelLaunches([region]) and KernelLaunches([region]).device_us(region) is None
