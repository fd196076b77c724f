"""Scenario 3, written as AITune's functional scripts 038 (`profile` of a Hugging Face-style
encoder with keyword inputs and an inference function) and 042 (ModuleFunctionKernelProfiler)
are. The encoder here is a small stand-in with DistilBERT's layout (embeddings, a layer list,
a classifier): the CPU host cannot download models."""

import json

import pytest
import torch
from torch import nn

from aitune.torch import ModuleFunctionKernelProfiler, profile


class TinyDistilBert(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(100, 32)
        self.transformer = nn.ModuleList([nn.TransformerEncoderLayer(32, 2, 64, batch_first=True) for _ in range(2)])
        self.pre_classifier = nn.Linear(32, 32)
        self.classifier = nn.Linear(32, 2)

    def forward(self, input_ids, attention_mask):
        x = self.embeddings(input_ids)
        for layer in self.transformer:
            x = layer(x, src_key_padding_mask=attention_mask == 0)
        return self.classifier(torch.relu(self.pre_classifier(x[:, 0])))


def test_profile_transformers_kwargs(tmp_path):
    model = TinyDistilBert().eval()
    encoded_inputs = {"input_ids": torch.randint(0, 100, (1, 9)), "attention_mask": torch.ones(1, 9, dtype=torch.long)}

    def inference_function(**kwargs):
        with torch.inference_mode():
            return model(**kwargs)

    result = profile(
        obj=model,
        input_data=dict(encoded_inputs),
        inference_function=inference_function,
        warmup_runs=1,
        measured_runs=2,
        trace_file=tmp_path / "trace.json",
    )

    json_path = tmp_path / "transformers_profile.json"
    markdown_path = tmp_path / "transformers_profile.md"
    json_path.write_text(json.dumps(result.data, indent=2) + "\n", encoding="utf-8")
    markdown_path.write_text(result.markdown(), encoding="utf-8")
    report = json.loads(json_path.read_text(encoding="utf-8"))

    assert result.trace_file == (tmp_path / "trace.json").resolve()
    assert result.trace_file.exists() and result.trace_file.name == "trace.json"
    assert result.trace_file.stat().st_size > 0
    assert report == result.data
    assert "artifacts" not in report
    assert report["config"]["warmup_runs"] == 1
    assert report["config"]["measured_runs"] == 2
    assert report["config"]["uses_inference_function"] is True
    assert report["input"]["kwargs"] == ["attention_mask", "input_ids"]
    assert len(report["runs"]) == 2
    assert all(run["timing"]["wall_time_us"] > 0 for run in report["runs"])
    assert all(run["timing"]["cpu_time_us"] > 0 for run in report["runs"])
    assert report["warnings"] == []
    assert report["regions"], "expected at least one untuned region for the encoder's submodules"
    assert all(region["kind"] == "untuned_module" for region in report["regions"])
    assert all("wrapper_state" not in region for region in report["regions"])
    untuned_ids = {region["id"] for region in report["regions"]}
    for run in report["runs"]:
        per_run_ids = {region["region_id"] for region in run["regions"]}
        assert per_run_ids <= untuned_ids and per_run_ids
        residual = run["residual"]
        assert 0.0 < residual["cpu_time_us"] < run["timing"]["cpu_time_us"]
        assert 0.0 < residual["cpu_time_fraction"] < 1.0
        assert "device_time_us" not in residual and "device_time_fraction" not in residual
    key_average_rows = report["profiler"]["key_averages"]["cpu_time_total"]["events"]
    assert any(row["key"] == "aitune.performance.profiled_run" for row in key_average_rows)
    assert "Performance Profile" in markdown_path.read_text(encoding="utf-8")


@pytest.mark.gpu
def test_profile_and_describe_kernels_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    pytest.importorskip("pandas", reason="ModuleFunctionKernelProfiler returns pandas DataFrames")
    model = TinyDistilBert().cuda().eval()
    ids = torch.randint(0, 100, (2, 16), device="cuda")
    mask = torch.ones(2, 16, dtype=torch.long, device="cuda")

    def inference_fn():
        model(ids, mask)

    profiler = ModuleFunctionKernelProfiler()
    profiling_df, function_data = profiler.profile(inference_fn, module=model)
    df = profiler.describe_results(profiling_df, function_data)
    assert len(df) > 0 and len(function_data) > 0
    for row in df.itertuples(index=False):
        assert row.num_distinct_samples == len(function_data[row.function_name])

    result = profile(model, (ids, mask), warmup_runs=1, measured_runs=2)
    for run in result.data["runs"]:
        assert run["timing"]["device_time_us"] > 0
    assert "CUDA" in result.data["profiler"]["activities"]


if __name__ == "__main__":
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmpdir:
        test_profile_transformers_kwargs(tmp_path=Path(tmpdir))
