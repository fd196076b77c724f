"""The TensorRT engine runner against TensorRT's runtime contracts (docs/reference/tensorrt.md#runtime-and-timing-cache),
with the fake `tensorrt` computing in onnxruntime and the fake CUDA of tests/fakes/fake_cuda.py: the
engine's device, 256-byte aligned addresses, a context per stream and per captured graph, a
private stream instead of the default one, the None of create_execution_context, host and shape
tensors, and profiles reconciled with the axes the export made static."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import fake_cuda
import fake_tensorrt as fake
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import aitune.torch.backend.tensorrt.tensorrt_backend as trt_backend
from aitune.torch.backend.tensorrt import builder as trt_builder
from aitune.torch.backend.tensorrt import cuda_ops
from aitune.torch.backend.tensorrt.engine_runner import EngineRunner
from aitune.torch.backend.tensorrt.tensorrt_config import TensorRTBackendConfig

CPU = torch.device("cpu")
PROFILE = [[([1, 4], [4, 4], [8, 4])]]


@pytest.fixture
def cuda(monkeypatch):
    fake.reset(ort=True)
    monkeypatch.setattr(cuda_ops, "CUDA", fake_cuda.CUDA)
    return fake_cuda.CUDA


def _onnx(path: Path, width: int | str = 4) -> Path:
    """y = 2 x + 1 for x of shape [batch, width] (`width` a name: dynamic)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("Mul", ["x", "two"], ["x2"]), helper.make_node("Add", ["x2", "one"], ["y"])]
    graph = helper.make_graph(nodes, "affine", [x], [y], initializer=[two, one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _plan(tmp_path: Path, profiles=PROFILE, width: int | str = 4) -> tuple[bytes, list]:
    onnx_path = _onnx(tmp_path / "model.onnx", width)
    return trt_builder.build_engine(
        fake.as_module(), onnx_path, tmp_path / "model.plan", profiles, ["x"], TensorRTBackendConfig(), None
    )


def _runner(tmp_path: Path) -> EngineRunner:
    plan, profiles = _plan(tmp_path)
    return EngineRunner(fake.as_module(), plan, CPU, ["x"], profiles, ["x"])


def _aligned(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of `tensor` at a 256-byte aligned address (CPU allocations are only 64-byte aligned)."""
    raw = torch.empty(tensor.numel() * tensor.element_size() + 256, dtype=torch.uint8)
    offset = (-raw.data_ptr()) % 256
    out = raw[offset : offset + tensor.numel() * tensor.element_size()].view(tensor.dtype).view(tensor.shape)
    out.copy_(tensor)
    return out


def _expected(x: torch.Tensor) -> torch.Tensor:
    return x.float() * 2 + 1


def _executions() -> list[tuple]:
    return [c for c in fake.calls if c[0] == "execute_async_v3"]


# -- device ----------------------------------------------------------------------------------
def test_the_engine_lives_on_the_runners_device_whatever_device_is_current(cuda, tmp_path):
    """ait.load(..., device_map=...) to GPU 1 while GPU 0 is current: deserialization, context
    and enqueue happen on GPU 1, where the buffers are, and GPU 0 stays current."""
    plan, profiles = _plan(tmp_path)
    fake_cuda.reset(gpu_of_cpu=1, current_device=0)  # the runner's (CPU) tensors are GPU 1's memory
    runner = EngineRunner(fake.as_module(), plan, CPU, ["x"], profiles, ["x"])
    assert cuda.current_device() == 0
    x = _aligned(torch.randn(3, 4))
    torch.testing.assert_close(runner.run([x])["y"], _expected(x))
    assert cuda.current_device() == 0


def test_a_build_runs_on_the_tuning_device_and_leaves_the_callers_device_current(cuda, tmp_path, monkeypatch):
    from .test_tensorrt_build import Pool, _build

    monkeypatch.setattr(trt_backend, "_import_tensorrt", fake.as_module)
    fake_cuda.reset(gpu_of_cpu=1, current_device=0)
    backend = _build(TensorRTBackendConfig(), tmp_path)  # builds on the CPU, GPU 1 for the fake
    assert cuda.current_device() == 0
    x = _aligned(torch.randn(2, 3, 8, 8))
    torch.manual_seed(0)
    torch.testing.assert_close(backend._infer(x), Pool().eval()(x), rtol=1e-4, atol=1e-5)
    assert cuda.current_device() == 0


# -- alignment -------------------------------------------------------------------------------
def test_an_input_that_is_not_256_byte_aligned_is_bound_through_an_aligned_copy(cuda, tmp_path):
    runner = _runner(tmp_path)
    base = _aligned(torch.randn(5, 4))
    x = base[1:]  # contiguous, 16 bytes past an aligned address: what a slice or a split piece is
    assert x.is_contiguous() and x.data_ptr() % 256
    torch.testing.assert_close(runner.run([x])["y"], _expected(x))
    bound = [c[2] for c in fake.calls if c[:2] == ("set_tensor_address", "x")]
    assert bound[-1] % 256 == 0 and bound[-1] != x.data_ptr()
    fake.calls.clear()
    runner.run([base])
    assert [c[2] for c in fake.calls if c[:2] == ("set_tensor_address", "x")] == [base.data_ptr()]  # no copy


# -- create_execution_context ----------------------------------------------------------------
def test_a_context_tensorrt_cannot_allocate_is_an_out_of_memory_error_at_load(cuda, tmp_path):
    plan, profiles = _plan(tmp_path)
    fake.state["context_oom"] = True
    with pytest.raises(torch.OutOfMemoryError, match=r"create_execution_context returned None.*out of memory"):
        EngineRunner(fake.as_module(), plan, CPU, ["x"], profiles, ["x"])


def test_a_context_for_a_new_stream_that_cannot_be_allocated_is_an_out_of_memory_error(cuda, tmp_path):
    runner = _runner(tmp_path)
    x = _aligned(torch.randn(2, 4))
    runner.run([x])  # the default stream's (private stream's) context: created at load
    fake.state["context_oom"] = True
    with cuda.use_stream(cuda.new_stream(CPU)), pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        runner.run([x])


# -- streams ---------------------------------------------------------------------------------
def test_calls_from_threads_on_their_own_streams_each_use_their_own_context(cuda, tmp_path):
    runner = _runner(tmp_path)
    streams = [cuda.new_stream(CPU) for _ in range(3)]
    start = threading.Barrier(len(streams))
    errors, results = [], []

    def serve(stream) -> None:
        try:
            start.wait()
            with cuda.use_stream(stream):
                for batch in (1, 3, 8, 2):
                    x = _aligned(torch.randn(batch, 4))
                    results.append((runner.run([x])["y"], _expected(x)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=serve, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 12
    for out, ref in results:
        torch.testing.assert_close(out, ref)
    assert {c[1] for c in _executions()} == {s.cuda_stream for s in streams}


def test_beyond_eight_streams_the_least_recently_used_context_is_dropped_after_its_work(cuda, tmp_path):
    runner = _runner(tmp_path)
    streams = [cuda.new_stream(CPU) for _ in range(9)]
    x = _aligned(torch.randn(2, 4))
    for stream in streams:
        with cuda.use_stream(stream):
            runner.run([x])
    assert len([c for c in fake.calls if c == ("create_execution_context",)]) == 9  # the first one at load
    assert streams[0].cuda_stream not in runner._streams and len(runner._streams) == 8
    assert ("event_synchronize", streams[0].cuda_stream) in cuda.log  # its last work finished first
    with cuda.use_stream(streams[0]):
        torch.testing.assert_close(runner.run([x])["y"], _expected(x))  # a new context for it


def test_a_call_from_the_default_stream_runs_on_a_private_stream_forked_and_joined(cuda, tmp_path, caplog):
    runner = _runner(tmp_path)
    x = _aligned(torch.randn(2, 4))
    with caplog.at_level("WARNING", logger="tensorrt"):
        torch.testing.assert_close(runner.run([x])["y"], _expected(x))
    (execution,) = _executions()
    private = execution[1]
    assert private != fake_cuda.DEFAULT_STREAM
    waits = [entry for entry in cuda.log if entry[0] == "wait"]
    assert waits == [("wait", private, 0), ("wait", 0, private)]  # fork before, join after
    assert fake.DEFAULT_STREAM_WARNING not in caplog.text


# -- CUDA graphs -----------------------------------------------------------------------------
def _capture(cuda, runner: EngineRunner, static: list[torch.Tensor], side=None):
    """What the CUDA-graph runner does for a new key: a warm-up call and a capture on one side stream
    (taken from a pool: several keys may get the same one)."""
    side = side or cuda.new_stream(CPU)
    with cuda.use_stream(side):
        runner.run(static)
    cuda.synchronize(CPU, side)
    with cuda.capture(side) as graph:
        outputs = runner.run(static)
    return graph, static, outputs


def _replay(captured, inputs: list[torch.Tensor]) -> torch.Tensor:
    graph, static, outputs = captured
    for buffer, value in zip(static, inputs):
        buffer.copy_(value)
    graph.replay()
    return outputs["y"].clone()


def test_replaying_an_earlier_shapes_graph_after_another_shape_was_captured(cuda, tmp_path):
    runner = _runner(tmp_path)
    side = cuda.new_stream(CPU)
    graphs = {batch: _capture(cuda, runner, [_aligned(torch.randn(batch, 4))], side) for batch in (2, 4, 8)}
    with cuda.use_stream(side):
        runner.run([_aligned(torch.randn(3, 4))])  # an ordinary call of yet another shape on that stream
    for batch in (2, 8, 4, 2):
        x = torch.randn(batch, 4)
        torch.testing.assert_close(_replay(graphs[batch], [x]), _expected(x))


def test_a_capture_records_the_input_copies_so_a_replay_converts_its_new_inputs(cuda, tmp_path):
    runner = _runner(tmp_path)
    captured = _capture(cuda, runner, [torch.randn(4, 4, dtype=torch.float64)])  # the engine takes float32
    x = torch.randn(4, 4, dtype=torch.float64)
    torch.testing.assert_close(_replay(captured, [x]), _expected(x))


def test_a_capture_without_a_warm_up_call_of_its_inputs_is_refused_before_tensorrt_runs(cuda, tmp_path):
    runner = _runner(tmp_path)
    side = cuda.new_stream(CPU)
    fake.calls.clear()
    with cuda.capture(side), pytest.raises(RuntimeError, match="must have run these input shapes once"):
        runner.run([_aligned(torch.randn(2, 4))])
    assert not _executions() and ("create_execution_context",) not in fake.calls


def test_a_graphs_context_is_released_with_the_graph(cuda, tmp_path):
    runner = _runner(tmp_path)
    kept = _capture(cuda, runner, [_aligned(torch.randn(2, 4))])
    dropped = _capture(cuda, runner, [_aligned(torch.randn(4, 4))])
    assert len(runner._graphs) == 2
    del dropped
    gc.collect()
    _capture(cuda, runner, [_aligned(torch.randn(8, 4))])  # captures prune the released graphs' contexts
    assert len(runner._graphs) == 2
    x = torch.randn(2, 4)
    torch.testing.assert_close(_replay(kept, [x]), _expected(x))


def test_data_dependent_outputs_refuse_a_capture_with_a_reason(cuda, tmp_path):
    fake.reset(outputs={"y": ((-1,), "FLOAT")}, data_dependent_shape=(5,))
    runner = _runner(tmp_path)
    x = _aligned(torch.randn(2, 4))
    side = cuda.new_stream(CPU)
    with cuda.use_stream(side):
        assert runner.run([x])["y"].shape == (5,)
    with cuda.capture(side), pytest.raises(RuntimeError, match="data-dependent shapes.*without CUDA graphs"):
        runner.run([x])


# -- engine I/O ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "option, words",
    [("host_inputs", "is in host memory"), ("shape_inputs", r"is a shape tensor \(is_shape_inference_io\)")],
)
def test_host_and_shape_tensor_inputs_are_refused_at_load(cuda, tmp_path, option, words):
    fake.state[option] = ["x"]
    plan, profiles = _plan(tmp_path)
    with pytest.raises(RuntimeError, match=rf"TensorRT engine tensor 'x' {words}: aitune binds device buffers only"):
        EngineRunner(fake.as_module(), plan, CPU, ["x"], profiles, ["x"])


# -- builds ----------------------------------------------------------------------------------
def test_a_later_builds_errors_are_quoted_from_the_one_process_logger(cuda, tmp_path):
    for folder in ("first", "second"):
        (tmp_path / folder).mkdir()
    _plan(tmp_path / "first")  # its Builder's logger is the one TensorRT keeps for the process
    fake.state["build_fails_with"] = ["Error Code 2: OutOfMemory (no memory for tactic 7)"]
    with pytest.raises(RuntimeError, match=r"(?s)Last TensorRT errors:\n  Error Code 2: OutOfMemory"):
        _plan(tmp_path / "second")


def test_an_axis_the_export_made_static_gets_min_opt_max_of_its_size(cuda, tmp_path, caplog):
    profiles = [[([1, 2], [4, 8], [8, 8])]]  # recorded widths 2..8, but the ONNX input has width 4
    with caplog.at_level("WARNING", logger="aitune"):
        _, built = _plan(tmp_path, profiles, width=4)
    assert built == [[([1, 4], [4, 4], [8, 4])]]
    assert [c for c in fake.calls if c[0] == "set_shape"] == [("set_shape", "x", (1, 4), (4, 4), (8, 4))]
    assert "axis 1: the ONNX export made it static (size 4)" in caplog.text


def test_a_static_axis_outside_the_profiles_range_fails_the_build_with_both_sizes(cuda, tmp_path):
    with pytest.raises(RuntimeError, match=r"axis 1 static with size 4; expected a size in .* \[6, 8\], got 4"):
        _plan(tmp_path, [[([1, 6], [4, 8], [8, 8])]], width=4)
