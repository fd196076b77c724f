"""The fake `tensorrt` refuses what the real bindings refuse (the conformance tier in
tests/conformance checks its names and signatures against the real 10.x and 11.x wheels; this
file checks the behaviour those checks cannot see)."""

from __future__ import annotations

import json

import fake_cuda
import fake_tensorrt as fake
import pytest
import torch


@pytest.fixture
def trt():
    fake.reset()
    return fake.as_module()


def _builder(trt):
    return trt.Builder(trt.ILogger())


def test_aitune_gets_only_tensorrt_names(trt):
    assert not hasattr(trt, "reset") and not hasattr(trt, "calls") and not hasattr(trt, "state")
    assert trt.__version__ == "11.4.0.106"
    assert not hasattr(trt.BuilderFlag, "FP16")  # removed in TensorRT 11 (strongly typed networks only)


def test_objects_take_no_unknown_attributes(trt):
    config = _builder(trt).create_builder_config()
    with pytest.raises(
        AttributeError,
        match=r"'tensorrt.IBuilderConfig' object has no attribute "
        r"'builder_optimisation_level'",
    ):
        config.builder_optimisation_level = 3
    config.builder_optimization_level = 3  # a real property
    engine_name = _builder(trt).create_network().num_inputs
    assert engine_name == 0
    with pytest.raises(AttributeError, match="has no setter"):
        _builder(trt).create_network().num_inputs = 2


def test_classes_without_a_python_constructor_cannot_be_instantiated(trt):
    for cls in (trt.IBuilderConfig, trt.ICudaEngine, trt.IExecutionContext, trt.IHostMemory, trt.ITimingCache):
        with pytest.raises(TypeError, match="No constructor defined"):
            cls()


def test_arguments_of_the_wrong_type_are_refused(trt):
    config = _builder(trt).create_builder_config()
    with pytest.raises(TypeError, match=r"(?s)incompatible function arguments.*pool_size='1' is not int"):
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, "1")
    with pytest.raises(TypeError, match="incompatible function arguments"):
        config.hardware_compatibility_level = "AMPERE_PLUS"  # the enum member, not its name
    with pytest.raises(TypeError, match="incompatible function arguments"):
        config.set_timing_cache(config.create_timing_cache(b""), ignore_mismatch=0)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        config.set_flag(6)  # enums do not equal their values
    assert int(trt.BuilderFlag.TF32) == 6 and trt.BuilderFlag.TF32 != 6


def test_host_memory_is_a_buffer_not_bytes(trt):
    config = _builder(trt).create_builder_config()
    cache = config.create_timing_cache(b"abc").serialize()
    assert isinstance(cache, trt.IHostMemory) and not isinstance(cache, (bytes, bytearray))
    assert bytes(memoryview(cache)) == b"abc+merged" and cache.nbytes == 10 and cache.dtype == trt.DataType.UINT8
    with pytest.raises(TypeError):
        len(cache)
    with pytest.raises(TypeError):
        cache[0]


def test_data_types_are_those_of_tensorrt_11(trt):
    assert [m.name for m in trt.DataType] == [
        "FLOAT",
        "HALF",
        "INT8",
        "INT32",
        "BOOL",
        "UINT8",
        "FP8",
        "BF16",
        "INT64",
        "INT4",
        "FP4",
        "E8M0",
    ]


def test_documented_failure_values(trt):
    profile = _builder(trt).create_optimization_profile()
    config = _builder(trt).create_builder_config()
    assert not profile and config.add_optimization_profile(profile) == -1  # an invalid (empty) profile
    with pytest.raises(ValueError, match="min <= opt <= max"):
        profile.set_shape("x", (1, 4), (2, 4), (1, 4))
    profile.set_shape("x", (1, 4), (2, 4), (8, 4))
    assert profile and config.add_optimization_profile(profile) == 0
    plan = fake._host_memory(
        b'{"inputs": ["x"], "outputs": {"y": [[2, 4], "FLOAT"]}, '
        b'"profiles": [{"x": [[1, 4], [2, 4], [8, 4]]}], "input_types": {}}'
    )
    engine = trt.Runtime(trt.ILogger()).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    assert context.set_optimization_profile_async(1, 0) is False  # the engine has one profile
    assert context.set_input_shape("x", (9, 4)) is False  # outside the profile
    assert context.set_input_shape("nope", (2, 4)) is False
    assert context.set_tensor_address("nope", 1024) is False
    assert context.set_output_allocator("x", None) is False  # not an output
    assert context.execute_async_v3(0) is False  # nothing bound yet
    assert context.set_input_shape("x", (2, 4)) and context.set_tensor_address("x", 1024)
    assert context.set_tensor_address("y", 2048) and context.execute_async_v3(0) is True
    assert trt.Runtime(trt.ILogger()).deserialize_cuda_engine(b"not a plan") is None


# -- the runtime contracts the fake keeps (see fake_tensorrt.py's docstring) ----------------------
_PLAN = (
    b'{"inputs": ["x"], "outputs": {"y": [[2, 4], "FLOAT"]}, '
    b'"profiles": [{"x": [[1, 4], [2, 4], [8, 4]]}], "input_types": {}}'
)


class _Quoting(fake.ILogger):
    def __init__(self) -> None:
        fake.ILogger.__init__(self)
        self.lines: list[str] = []

    def log(self, severity, msg) -> None:
        self.lines.append(msg)


def _bound_context(trt, engine=None):
    engine = engine or trt.Runtime(trt.ILogger()).deserialize_cuda_engine(fake._host_memory(_PLAN))
    context = engine.create_execution_context()
    assert context.set_input_shape("x", (2, 4)) and context.set_tensor_address("x", 1024)
    assert context.set_tensor_address("y", 2048)
    return context


def test_the_first_logger_receives_every_later_objects_messages(trt):
    first, second = _Quoting(), _Quoting()
    trt.Builder(first)
    fake.state["build_fails_with"] = ["Error Code 2: OutOfMemory"]
    builder = trt.Builder(second)
    assert builder.build_serialized_network(builder.create_network(), builder.create_builder_config()) is None
    assert first.lines == ["Error Code 2: OutOfMemory"] and second.lines == []


def test_an_engine_runs_only_on_the_device_it_was_deserialized_on(trt):
    fake_cuda.reset(gpu_of_cpu=1, current_device=1)
    engine = trt.Runtime(trt.ILogger()).deserialize_cuda_engine(fake._host_memory(_PLAN))
    context = _bound_context(trt, engine)
    fake_cuda.CUDA.set_device(torch.device("cuda", 0))
    assert engine.create_execution_context() is None and context.execute_async_v3(16) is False
    fake_cuda.CUDA.set_device(torch.device("cuda", 1))
    assert context.execute_async_v3(16) is True
    fake_cuda.reset(gpu_of_cpu=0, current_device=0)  # the buffers on GPU 0, the engine on GPU 1
    assert context.execute_async_v3(16) is False


def test_addresses_must_be_256_byte_aligned(trt):
    context = _bound_context(trt)
    assert context.set_tensor_address("x", 1024 + 16) is False and context.set_tensor_address("x", 256) is True


def test_a_context_is_not_enqueued_on_a_second_stream_before_its_first_streams_work(trt):
    cuda = fake_cuda.CUDA
    first, second = cuda.new_stream(torch.device("cpu")), cuda.new_stream(torch.device("cpu"))
    context = _bound_context(trt)
    assert context.execute_async_v3(first.cuda_stream) is True
    assert context.execute_async_v3(second.cuda_stream) is False
    cuda.wait(torch.device("cpu"), second, first)
    assert context.execute_async_v3(second.cuda_stream) is True


class _Allocator(fake.IOutputAllocator):
    def __init__(self) -> None:
        fake.IOutputAllocator.__init__(self)
        self.shapes: list[tuple] = []

    def reallocate_output_async(self, tensor_name, memory, size, alignment, stream) -> int:
        return 4096

    def notify_shape(self, tensor_name, shape) -> None:
        self.shapes.append(tuple(shape))


def test_a_captured_enqueue_replays_on_the_contexts_state_at_replay_time(trt):
    cuda = fake_cuda.CUDA
    side = cuda.new_stream(torch.device("cpu"))
    plan = json.loads(_PLAN)
    plan["outputs"]["y"] = [[-1], "FLOAT"]  # data-dependent: the engine calls its output allocator
    engine = trt.Runtime(trt.ILogger()).deserialize_cuda_engine(fake._host_memory(json.dumps(plan).encode()))
    context = engine.create_execution_context()
    captured, later = _Allocator(), _Allocator()
    assert context.set_input_shape("x", (2, 4)) and context.set_tensor_address("x", 1024)
    assert context.set_output_allocator("y", captured)
    with cuda.capture(side) as graph:
        assert context.execute_async_v3(side.cuda_stream) is True
        assert engine.create_execution_context() is None  # no allocation during a capture
    assert captured.shapes == []  # recorded, not run
    assert context.set_output_allocator("y", later)
    graph.replay()
    assert captured.shapes == [] and later.shapes == [(3,)]  # the replay used the state set after the capture
    with pytest.raises(fake_cuda.CudaError), cuda.capture(side):
        cuda.synchronize(torch.device("cpu"), side)


def test_host_and_shape_inputs_report_their_location(trt):
    plan = json.loads(_PLAN)
    plan.update(host_inputs=["x"], shape_inputs=["x"])
    engine = trt.Runtime(trt.ILogger()).deserialize_cuda_engine(fake._host_memory(json.dumps(plan).encode()))
    assert engine.get_tensor_location("x") == trt.TensorLocation.HOST and engine.is_shape_inference_io("x")
    assert engine.get_tensor_location("y") == trt.TensorLocation.DEVICE and not engine.is_shape_inference_io("y")
