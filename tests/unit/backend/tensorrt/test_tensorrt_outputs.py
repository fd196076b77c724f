"""A TensorRT plan's output structure (docs/reference/dispatch.md#serving-plan): rebuilt by the shared
OutputStructure, stored in io.json with the checkpoint's structure codec, read back from the
`output_template` that checkpoints written before held, and refused when io.json contradicts itself."""

from __future__ import annotations

import json

import fake_tensorrt as fake
import pytest
import torch

import aitune.torch as ait
import aitune.torch.backend.tensorrt.tensorrt_backend as trt_backend
from aitune.torch.backend.tensorrt import TensorRTBackend, TensorRTBackendConfig
from aitune.torch.global_context import published_batch_size


class TwoHeads(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.proj(x)
        return {"mean": y.mean(dim=1), "y": y}


@pytest.fixture
def built(monkeypatch, tmp_path) -> TensorRTBackend:
    fake.reset(outputs={"output_mean": ((2,), "FLOAT"), "output_y": ((2, 3), "FLOAT")})
    monkeypatch.setattr(trt_backend, "_import_tensorrt", fake.as_module)
    m = ait.Module(TwoHeads().eval(), "heads")
    with torch.no_grad():
        for bs in (2, 4):
            with published_batch_size(bs):
                m(torch.randn(bs, 4))
    graph = m.graph_specs[0]
    backend = TensorRTBackend(TensorRTBackendConfig())
    backend._device = torch.device("cpu")  # Backend._build on the CPU: the fake engine serves it
    backend._graph_spec = graph
    backend._build(TwoHeads().eval(), graph, graph.samples, torch.device("cpu"), tmp_path / "build")
    return backend


def _restored(built: TensorRTBackend, edit_io=None) -> TensorRTBackend:
    data = built.to_dict()
    artifacts = {k: data[k].path for k in ("plan", "optimization_profiles", "io")}
    if edit_io is not None:
        path = artifacts["io"]
        path.write_text(json.dumps(edit_io(json.loads(path.read_text()))))
    graph = built._graph_spec
    graph.reference_outputs = []  # a checkpoint saved without samples: io.json alone holds the structure
    return TensorRTBackend.restore(TensorRTBackendConfig(), artifacts, graph, "cpu")


def test_outputs_are_rebuilt_into_the_forward_structure(built):
    out = built._infer(torch.randn(2, 4))
    assert set(out) == {"mean", "y"} and out["y"].shape == (2, 3) and out["mean"].shape == (2,)
    io = json.loads(built.to_dict()["io"].path.read_text())
    assert io["output_paths"] == [["mean"], ["y"]] and "dict" in io["output_structure"]
    assert "output_template" not in io


def test_a_plan_restores_its_structure_from_io_json(built):
    out = _restored(built)._infer(torch.randn(2, 4))
    assert set(out) == {"mean", "y"}


def test_the_output_template_of_older_checkpoints_still_loads(built):
    def legacy(io):  # io.json as written before output_structure: dicts as JSON objects
        del io["output_structure"]
        io["output_template"] = {"dict": {"mean": {"tensor": True}, "y": {"tensor": True}}}
        return io

    out = _restored(built, legacy)._infer(torch.randn(2, 4))
    assert set(out) == {"mean", "y"} and out["y"].shape == (2, 3)


def test_io_json_that_contradicts_itself_is_refused(built):
    def swapped(io):
        io["output_paths"] = [["y"], ["mean"], ["extra"]]
        return io

    with pytest.raises(RuntimeError, match="the checkpoint is inconsistent"):
        _restored(built, swapped)
