"""ait.profile (AITune's PerformanceProfile, schema version 1) and
ait.ModuleFunctionKernelProfiler."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

import aitune.torch as ait
from aitune.torch.backend.kernels.module_function_kernel_profiler import attribute_kernels


class TinyEncoder(nn.Module):
    """A model with named children and keyword inputs, like a Hugging Face encoder."""

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(50, 16)
        self.layers = nn.ModuleList([nn.Linear(16, 16), nn.Linear(16, 16)])
        self.classifier = nn.Linear(16, 3)

    def forward(self, input_ids, attention_mask):
        x = self.embeddings(input_ids) * attention_mask.unsqueeze(-1)
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.classifier(x.mean(1))


def _inputs():
    return {"input_ids": torch.randint(0, 50, (1, 12)), "attention_mask": torch.ones(1, 12)}


def test_profile_regions_and_shares():
    model = TinyEncoder().eval()
    result = ait.profile(model, _inputs(), warmup_runs=0, measured_runs=2)
    report = result.data
    assert report["schema_version"] == 1 and report["target"]["type"].endswith("TinyEncoder")
    assert report["input"] == {"args_count": 0, "kwargs": ["attention_mask", "input_ids"]}
    # The ModuleList is never called itself: its entries are the regions.
    assert {r["name"] for r in report["regions"]} == {"embeddings", "layers.0", "layers.1", "classifier"}
    ids = {r["id"] for r in report["regions"]}
    for run in report["runs"]:
        assert {r["region_id"] for r in run["regions"]} == ids
        assert all(r["calls"] == 1 for r in run["regions"])
        shares = sum(r["cpu_time_fraction"] for r in run["regions"]) + run["residual"]["cpu_time_fraction"]
        assert shares == pytest.approx(1.0, abs=1e-6)
    assert report["profiler"]["activities"][0] == "CPU"
    assert "`untuned_module:layers.0`" in result.markdown()


def test_profile_attributes_a_tuned_module_to_its_wrapper(cpu_eager_strategy):
    model = TinyEncoder().eval()
    model.classifier = ait.Module(model.classifier, "classifier-head", strategy=cpu_eager_strategy)
    ait.tune(lambda x: model.classifier(x), [torch.randn(16) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    result = ait.profile(model, _inputs(), warmup_runs=0, measured_runs=1)
    regions = {r["name"]: r for r in result.data["regions"]}
    assert regions["classifier-head"]["kind"] == "aot_managed_module"
    assert regions["classifier-head"]["wrapper_state"] == "tuned"
    assert regions["classifier-head"]["module_type"].endswith("Linear")
    assert "classifier" not in regions  # its time belongs to the wrapper's region only
    (run,) = result.data["runs"]
    assert "aot_module:classifier-head" in {r["region_id"] for r in run["regions"]}


def test_profile_inputs_and_arguments():
    model = nn.Linear(4, 2).eval()
    positional = ait.profile(model, (torch.randn(1, 4),), warmup_runs=0, measured_runs=1)
    assert positional.data["input"] == {"args_count": 1, "kwargs": []}
    nothing = ait.profile(
        model, None, inference_function=lambda: model(torch.randn(1, 4)), warmup_runs=0, measured_runs=1
    )
    assert nothing.data["input"]["args_count"] == 0 and nothing.trace_file is None
    with pytest.raises(ValueError, match="warmup_runs must be an integer >= 0"):
        ait.profile(model, torch.randn(1, 4), warmup_runs=-1)
    with pytest.raises(ValueError, match="measured_runs must be an integer > 0"):
        ait.profile(model, torch.randn(1, 4), measured_runs=0)
    with pytest.raises(ValueError, match="markdown"):
        positional.markdown(options={"x": 1})


def test_kernel_profiler_needs_a_module_and_cuda():
    profiler = ait.ModuleFunctionKernelProfiler()
    with pytest.raises(ValueError, match="module must be provided when function is not an nn.Module"):
        profiler.profile(lambda: None)
    with pytest.raises(ValueError, match="warmup_iterations must be greater than or equal to 0"):
        profiler.profile(nn.Linear(2, 2), warmup_iterations=-1)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is required"):
            profiler.profile(nn.Linear(2, 2))
    names = dict(profiler.get_functions_to_patch())
    assert {"linear", "relu", "gelu", "conv2d", "scaled_dot_product_attention"} <= set(names)
    assert "_canonical_mask" not in names and "handle_torch_function" not in names


def test_kernels_are_attributed_to_the_nearest_module_and_function():
    """The attribution on the profiler's event tree (CPU ops with the kernels they launched)."""

    def event(name, parent=None, kernels=()):
        return SimpleNamespace(
            name=name,
            cpu_parent=parent,
            device_type="DeviceType.CPU",
            kernels=[SimpleNamespace(name=k, duration=d) for k, d in kernels],
        )

    root = event("ait_nn_module:Net")
    block = event("ait_nn_module:block", root)
    linear = event("ait_torch.nn.functional:linear", block)
    addmm = event("aten::addmm", linear, kernels=[("sm90_gemm", 12.5), ("splitK_reduce", 1.5)])
    stray = event("aten::relu", None, kernels=[("warmup_kernel", 1.0)])  # outside every label
    modules = {"Net": nn.Identity(), "block": nn.Linear(2, 2)}
    rows = attribute_kernels([root, block, linear, addmm, stray], modules)
    assert [(r["module_name"], r["function_name"], r["op"], r["kernel"], r["kernel_us"]) for r in rows] == [
        ("block", "linear", "aten::addmm", "sm90_gemm", 12.5),
        ("block", "linear", "aten::addmm", "splitK_reduce", 1.5),
    ]
    assert rows[0]["module"] is modules["block"]


@pytest.mark.gpu
def test_kernel_profiler_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    pytest.importorskip("pandas", reason="ModuleFunctionKernelProfiler returns pandas DataFrames")
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 8)).cuda().eval()
    profiler = ait.ModuleFunctionKernelProfiler()
    data = [((torch.randn(4, 64, device="cuda"),), {}), ((torch.randn(8, 64, device="cuda"),), {})]
    frame, function_data = profiler.profile(model, data)
    assert len(frame) > 0 and set(frame["function_name"]) >= {"linear", "gelu"}
    assert set(frame["module_name"]) <= {"Sequential", "0", "1", "2"} and (frame["kernel_us"] > 0).all()
    assert len(function_data["linear"]) == 4  # two layers x two distinct batch shapes
    summary = profiler.describe_results(frame, function_data)
    for row in summary.itertuples(index=False):
        assert row.num_distinct_samples == len(function_data[row.function_name])
    assert summary["time_spent_pct"].sum() == pytest.approx(100.0)
