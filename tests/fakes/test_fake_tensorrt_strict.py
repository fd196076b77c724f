"""The fake `tensorrt` refuses what the real bindings refuse (the conformance tier in
tests/conformance checks its names and signatures against the real 10.x and 11.x wheels; this
file checks the behaviour those checks cannot see)."""

from __future__ import annotations

import fake_tensorrt as fake
import pytest


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
