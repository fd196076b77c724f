"""The engine runner's runtime contracts with the real TensorRT on a GPU (the unit tests of
test_tensorrt_runtime.py check the same against the fakes): unaligned inputs, a private stream for
default-stream callers, threads on their own streams, aitune's CUDA-graph runner replaying earlier
shapes after later captures, a torch.cuda.graph capture, profiles reconciled with a static axis,
and an engine on a second GPU. Needs CUDA and the tensorrt package; runs in seconds
(`pytest -m gpu unit/backend/tensorrt/test_tensorrt_runner_gpu.py`)."""

from __future__ import annotations

import importlib.util
import threading

import pytest
import torch

from aitune._native import _C
from aitune.torch.backend.tensorrt import builder as trt_builder
from aitune.torch.backend.tensorrt.engine_runner import EngineRunner
from aitune.torch.backend.tensorrt.tensorrt_config import TensorRTBackendConfig

from .test_tensorrt_runtime import _onnx

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("tensorrt") is None, reason="needs the tensorrt package"),
]
PROFILE = [[([1, 4], [4, 4], [16, 4])]]


def _runner(tmp_path, device="cuda:0", profiles=PROFILE, width=4) -> EngineRunner:
    import tensorrt as trt

    plan, built = trt_builder.build_engine(
        trt,
        _onnx(tmp_path / "model.onnx", width),
        tmp_path / "model.plan",
        profiles,
        ["x"],
        TensorRTBackendConfig(),
        None,
    )
    return EngineRunner(trt, plan, torch.device(device), ["x"], built, ["x"])


def _unaligned(batch: int, device="cuda:0") -> torch.Tensor:
    buffer = torch.randn(batch * 4 + 1, device=device)
    x = buffer[1:].view(batch, 4)
    assert x.is_contiguous() and x.data_ptr() % 256
    return x


def test_unaligned_inputs_from_the_default_stream(tmp_path):
    runner = _runner(tmp_path)
    assert torch.cuda.current_stream().cuda_stream == 0
    for batch in (1, 5, 16):
        x = _unaligned(batch)
        torch.testing.assert_close(runner.run([x])["y"], x * 2 + 1)


def test_threads_on_their_own_streams(tmp_path):
    runner = _runner(tmp_path)
    errors = []

    def serve() -> None:
        stream = torch.cuda.Stream()
        try:
            with torch.cuda.stream(stream):
                for i in range(50):
                    x = torch.randn(1 + i % 16, 4, device="cuda")
                    out = runner.run([x])["y"]
                    torch.testing.assert_close(out, x * 2 + 1)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=serve) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_the_cuda_graph_runner_replays_earlier_shapes_after_later_captures(tmp_path):
    runner = _runner(tmp_path)
    graphs = _C.CudaGraphRunner(lambda x: [runner.run([x])["y"]], cache_size=8, clone_outputs=True)
    for batch in (2, 4, 8, 16, 2, 8, 4, 16, 2):
        x = torch.randn(batch, 4, device="cuda")
        torch.testing.assert_close(graphs.run([x])[0], x * 2 + 1)
    stats = dict(graphs.stats())
    assert stats.get("capture_failures", 0) == 0, graphs.last_warning
    assert graphs.num_cached_graphs == 4


def test_a_torch_cuda_graph_capture_after_a_warm_up_on_its_stream(tmp_path):
    runner = _runner(tmp_path)
    stream = torch.cuda.Stream()
    static = {batch: torch.randn(batch, 4, device="cuda") for batch in (3, 9)}
    graphs, outputs = {}, {}
    for batch, x in static.items():
        with torch.cuda.stream(stream):
            runner.run([x])
        stream.synchronize()
        graphs[batch] = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graphs[batch], stream=stream):
            outputs[batch] = runner.run([x])["y"]
    for batch in (3, 9, 3):
        fresh = torch.randn(batch, 4, device="cuda")
        static[batch].copy_(fresh)
        graphs[batch].replay()
        torch.testing.assert_close(outputs[batch], fresh * 2 + 1)


def test_a_static_axis_gets_its_size_in_the_profile(tmp_path):
    runner = _runner(tmp_path, profiles=[[([1, 2], [4, 8], [16, 8])]], width=4)
    x = torch.randn(3, 4, device="cuda")
    torch.testing.assert_close(runner.run([x])["y"], x * 2 + 1)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_an_engine_on_the_second_gpu_while_the_first_is_current(tmp_path):
    torch.cuda.set_device(0)
    runner = _runner(tmp_path, device="cuda:1")
    assert torch.cuda.current_device() == 0
    x = _unaligned(5, device="cuda:1")
    torch.testing.assert_close(runner.run([x])["y"], x * 2 + 1)
    assert torch.cuda.current_device() == 0
