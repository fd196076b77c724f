"""A recording fake of the `tensorrt` Python module, for unit tests of aitune's builder and runner
glue on hosts without TensorRT (allowed by the project's testing rules). It is no more permissive
than the real bindings: every class, method, property and enum member it defines exists in the
real TensorRT 10.15 and 11.4 modules with the same parameter names and types, its enum values are
11.4's, and fake_trt_strict.py makes its objects refuse unknown attributes and wrongly typed
arguments. The conformance tier (tests/conformance) checks all of that against the real wheels.
Setters return the real failure values where the real API documents them (set_input_shape,
set_tensor_address, set_optimization_profile_async, set_output_allocator, execute_async_v3 return
False; add_optimization_profile returns -1; set_shape raises ValueError).

Tests control it through reset(), `calls` and `state`; aitune gets `as_module()`, a module that
holds only the TensorRT names. Every call lands in `calls`.

The "plan" is JSON describing the engine's I/O, so the runner side can be exercised too. With
reset(ort=True) the engine really computes on the CPU: it reads its inputs from the addresses it
was given, runs the parsed ONNX in onnxruntime and writes the results to the output addresses, so
a whole tune -> serve -> save -> load cycle runs through aitune's TensorRT glue without a GPU.

It keeps the runtime contracts TensorRT documents, with the CUDA state of fake_cuda.py:

* the logger is process-wide: the first logger given to a Builder or Runtime after reset() receives
  every message of every later object (TensorRT "internally considers" it a singleton);
* an engine belongs to the device current when it was deserialized: a context is created and
  enqueued only with that device current, on buffers of that device (a CPU tensor stands for the
  memory of fake_cuda's `gpu_of_cpu`);
* create_execution_context returns None when it cannot allocate the context's memory (during a
  stream capture, or with reset(context_oom=True));
* set_tensor_address refuses an address that is not 256-byte aligned;
* one context is never enqueued on two streams at once (work on its previous stream must be
  ordered before the new enqueue);
* an enqueue on a capturing stream is recorded, and its replay runs on the context's state at
  replay time (TensorRT's captured work reads the context's state: a context whose shapes or
  addresses changed after the capture replays the new ones);
* enqueues on the legacy default stream log TensorRT's performance warning;
* inputs in host memory (reset(host_inputs=[...])) and shape inputs (reset(shape_inputs=[...]))
  report TensorLocation.HOST / is_shape_inference_io;
* a profile whose min, opt or max differs from a static dimension of the parsed network fails the
  build, as TensorRT's does."""

from __future__ import annotations

import ctypes
import json
import types
from typing import Any

import fake_cuda
from fake_trt_strict import TrtEnum, TrtObject, api, api_property, refusal

__version__ = "11.4.0.106"  # the release whose enum values the fake uses
calls: list[tuple] = []
state: dict[str, Any] = {}

# The names aitune may use (as_module() holds exactly these).
API = (
    "__version__",
    "MemoryPoolType",
    "BuilderFlag",
    "NetworkDefinitionCreationFlag",
    "HardwareCompatibilityLevel",
    "TensorIOMode",
    "TensorLocation",
    "DataType",
    "ILogger",
    "IOutputAllocator",
    "IHostMemory",
    "Dims",
    "ITimingCache",
    "ITensor",
    "INetworkDefinition",
    "ParserError",
    "OnnxParser",
    "IOptimizationProfile",
    "IBuilderConfig",
    "Builder",
    "ICudaEngine",
    "IExecutionContext",
    "Runtime",
)


def reset(**options: Any) -> None:
    """options: parse_errors (list[str]), build_fails_with (list[str] logged as errors),
    reject_cache (bool), outputs ({name: (shape, dtype name)}) for built engines,
    data_dependent_shape (the shape a data-dependent output reports), ort (compute with onnxruntime),
    host_inputs / shape_inputs (input names of built engines), context_oom (bool). Also resets
    fake_cuda to one GPU with device 0 current."""
    calls.clear()
    state.clear()
    state.update(options)
    fake_cuda.reset()


def _record(*entry: Any) -> None:
    calls.append(entry)


def _use_logger(logger: Any) -> None:
    """The first logger after reset() is the process's logger: TensorRT sends it everything."""
    state.setdefault("process_logger", logger)


def _log(severity: Any, message: str) -> None:
    logger = state.get("process_logger")
    if logger is not None:
        logger.log(severity, message)


def _error(message: str) -> None:
    _log(ILogger.Severity.ERROR, message)


class MemoryPoolType(TrtEnum):
    WORKSPACE = 0


class BuilderFlag(TrtEnum):
    TF32 = 6


class NetworkDefinitionCreationFlag(TrtEnum):
    STRONGLY_TYPED = 0  # 1 in TensorRT 10.x: aitune reads the value, never assumes it


class HardwareCompatibilityLevel(TrtEnum):
    NONE = 0
    AMPERE_PLUS = 1
    SAME_COMPUTE_CAPABILITY = 2


class TensorIOMode(TrtEnum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class TensorLocation(TrtEnum):
    DEVICE = 0
    HOST = 1


class DataType(TrtEnum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    UINT8 = 5
    FP8 = 6
    BF16 = 7
    INT64 = 8
    INT4 = 9
    FP4 = 10
    E8M0 = 11


class _Severity(TrtEnum):
    INTERNAL_ERROR = 0
    ERROR = 1
    WARNING = 2
    INFO = 3
    VERBOSE = 4


_Severity.__name__ = _Severity.__qualname__ = "Severity"


class ILogger(TrtObject):
    Severity = _Severity
    INTERNAL_ERROR = _Severity.INTERNAL_ERROR
    ERROR = _Severity.ERROR
    WARNING = _Severity.WARNING
    INFO = _Severity.INFO
    VERBOSE = _Severity.VERBOSE

    @api
    def __init__(self) -> None:
        pass

    @api
    def log(self, severity: ILogger.Severity, msg: str) -> None:
        pass


class IOutputAllocator(TrtObject):
    """Implemented by the application (reallocate_output[_async], notify_shape)."""

    @api
    def __init__(self) -> None:
        pass


class IHostMemory(TrtObject):
    """Library-owned memory exposing the buffer protocol (not bytes: no len(), no indexing)."""

    __slots__ = ()

    def _nbytes(self) -> int:
        return ctypes.sizeof(self)

    def _dtype(self) -> DataType:
        return DataType.UINT8

    nbytes = api_property(_nbytes)
    dtype = api_property(_dtype)

    @refusal
    def __len__(self) -> int:
        raise TypeError("object of type 'tensorrt.IHostMemory' has no len()")

    @refusal
    def __getitem__(self, index: Any) -> Any:
        raise TypeError("'tensorrt.IHostMemory' object is not subscriptable")


def _host_memory(data: bytes) -> IHostMemory:
    """An IHostMemory holding a copy of `data` (a ctypes array, so memoryview() works on it)."""
    cls = type("IHostMemory", (IHostMemory, ctypes.c_ubyte * len(data)), {"__slots__": (), "__module__": __name__})
    return cls.from_buffer_copy(data)


class Dims(TrtObject):
    @api
    def __init__(self, shape: Sequence[int]) -> None:  # noqa: F821 - a TensorRT type name, checked as text
        self._fake_dims = tuple(shape)

    @api
    def __len__(self) -> int:
        return len(self._fake_dims)

    @api
    def __getitem__(self, arg0: int) -> int:
        return self._fake_dims[arg0]  # IndexError past the end, so tuple(dims) works

    def __repr__(self) -> str:
        return f"Dims({self._fake_dims})"


class ITimingCache(TrtObject):
    @api
    def serialize(self) -> IHostMemory:
        return _host_memory(self._fake_data + b"+merged")


class ITensor(TrtObject):
    def _name(self) -> str:
        return self._fake_name

    name = api_property(_name)

    def _shape(self) -> Dims:
        return Dims(self._fake_shape)  # -1 for a dynamic dimension

    shape = api_property(_shape)


class INetworkDefinition(TrtObject):
    def _num_inputs(self) -> int:
        return len(self._fake_inputs)

    num_inputs = api_property(_num_inputs)

    @api
    def get_input(self, index: int) -> ITensor:
        return self._fake_inputs[index]


class ParserError(TrtObject):
    @api
    def desc(self) -> str:
        return self._fake_desc

    @api
    def __str__(self) -> str:
        return self._fake_desc


class OnnxParser(TrtObject):
    @api
    def __init__(self, network: INetworkDefinition, logger: ILogger) -> None:
        self._fake_network = network
        self._fake_errors: list[str] = []

    @api
    def parse_from_file(self, model: str) -> bool:
        _record("parse_from_file", model)
        self._fake_errors = list(state.get("parse_errors", []))
        if self._fake_errors:
            return False
        import onnx

        onnx_model = onnx.load(model, load_external_data=False)
        initializers = {i.name for i in onnx_model.graph.initializer}
        self._fake_network._fake_inputs = [
            ITensor._fake_new(
                name=i.name,
                shape=tuple(d.dim_value if d.HasField("dim_value") else -1 for d in i.type.tensor_type.shape.dim),
            )
            for i in onnx_model.graph.input
            if i.name not in initializers
        ]
        state["onnx_outputs"] = [o.name for o in onnx_model.graph.output]
        state["onnx_path"] = model
        state["onnx_types"] = {
            v.name: v.type.tensor_type.elem_type for v in [*onnx_model.graph.input, *onnx_model.graph.output]
        }
        return True

    def _num_errors(self) -> int:
        return len(self._fake_errors)

    num_errors = api_property(_num_errors)

    @api
    def get_error(self, index: int) -> ParserError:
        return ParserError._fake_new(desc=self._fake_errors[index])


class IOptimizationProfile(TrtObject):
    @api
    def set_shape(self, input: str, min: Dims, opt: Dims, max: Dims) -> None:  # noqa: A002 - TensorRT's names
        low, mid, high = (tuple(s) for s in (min, opt, max))
        _record("set_shape", input, low, mid, high)
        if not len(low) == len(mid) == len(high):
            raise ValueError(f"set_shape({input!r}): min, opt and max have different ranks: {low}, {mid}, {high}")
        if not all(0 <= a <= b <= c for a, b, c in zip(low, mid, high)):
            raise ValueError(f"set_shape({input!r}): needs 0 <= min <= opt <= max, got {low}, {mid}, {high}")
        self._fake_shapes[input] = (low, mid, high)

    @api
    def __bool__(self) -> bool:
        return bool(self._fake_shapes)


class IBuilderConfig(TrtObject):
    @api
    def set_memory_pool_limit(self, pool: MemoryPoolType, pool_size: int) -> None:
        _record("set_memory_pool_limit", pool, pool_size)
        self._fake_pools[pool] = pool_size

    @api
    def get_memory_pool_limit(self, pool: MemoryPoolType) -> int:
        return self._fake_pools.get(pool, 0)

    def _get_level(self) -> int:
        return self._fake_level

    def _set_level(self, value: int) -> None:
        _record("set", "builder_optimization_level", value)
        self._fake_level = value

    builder_optimization_level = api_property(_get_level, _set_level)

    def _get_compatibility(self) -> HardwareCompatibilityLevel:
        return self._fake_compatibility

    def _set_compatibility(self, value: HardwareCompatibilityLevel) -> None:
        _record("set", "hardware_compatibility_level", value)
        self._fake_compatibility = value

    hardware_compatibility_level = api_property(_get_compatibility, _set_compatibility)

    @api
    def set_flag(self, flag: BuilderFlag) -> None:
        _record("set_flag", flag)
        self._fake_flags.add(flag)

    @api
    def clear_flag(self, flag: BuilderFlag) -> None:
        _record("clear_flag", flag)
        self._fake_flags.discard(flag)

    @api
    def get_flag(self, flag: BuilderFlag) -> bool:
        return flag in self._fake_flags

    @api
    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        _record("add_optimization_profile", dict(profile._fake_shapes))
        if not profile:  # the documented failure: an invalid (here: empty) profile
            return -1
        self._fake_profiles.append(profile)
        return len(self._fake_profiles) - 1

    @api
    def create_timing_cache(self, serialized_timing_cache: Buffer) -> ITimingCache:  # noqa: F821
        data = bytes(memoryview(serialized_timing_cache))
        _record("create_timing_cache", data)
        return ITimingCache._fake_new(data=data)

    @api
    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
        _record("set_timing_cache", cache._fake_data, ignore_mismatch)
        if cache._fake_data and state.get("reject_cache"):
            return False
        self._fake_timing_cache = cache
        return True

    @api
    def get_timing_cache(self) -> ITimingCache | None:
        return self._fake_timing_cache


class Builder(TrtObject):
    @api
    def __init__(self, logger: ILogger) -> None:
        self._fake_logger = logger
        _use_logger(logger)

    @api
    def create_network(self, flags: int = 0) -> INetworkDefinition:
        _record("create_network", flags)
        return INetworkDefinition._fake_new(flags=flags, inputs=[])

    @api
    def create_builder_config(self) -> IBuilderConfig:
        return IBuilderConfig._fake_new(
            flags=set(),
            profiles=[],
            pools={},
            level=3,
            compatibility=HardwareCompatibilityLevel.NONE,
            timing_cache=None,
        )

    @api
    def create_optimization_profile(self) -> IOptimizationProfile:
        return IOptimizationProfile._fake_new(shapes={})

    def _fail(self, *lines: str) -> None:
        for line in lines:
            _error(line)

    @api
    def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> IHostMemory | None:
        _record("build_serialized_network")
        if state.get("build_fails_with"):
            self._fail(*state["build_fails_with"])
            return None
        dynamic = [t._fake_name for t in network._fake_inputs if -1 in t._fake_shape]
        if dynamic and not config._fake_profiles:
            self._fail("Network has dynamic or shape inputs, but no optimization profile has been defined.")
            return None
        for index, profile in enumerate(config._fake_profiles):
            missing = [name for name in dynamic if name not in profile._fake_shapes]
            if missing:
                self._fail(f"Optimization profile {index} has no shape for the dynamic inputs {missing}.")
                return None
            mismatch = _static_dims_mismatch(network, index, profile)
            if mismatch:
                self._fail(mismatch)
                return None
        _log(ILogger.Severity.INFO, "engine built")
        outputs = state.get("outputs") or {n: (None, "FLOAT") for n in state.get("onnx_outputs", [])}
        if state.get("ort"):
            outputs = {n: (None, _ONNX_TO_TRT[state["onnx_types"][n]]) for n in state["onnx_outputs"]}
        inputs = [t._fake_name for t in network._fake_inputs]
        plan = {
            "inputs": inputs,
            "profiles": [p._fake_shapes for p in config._fake_profiles],
            "outputs": outputs,
            "onnx": state.get("onnx_path") if state.get("ort") else None,
            "input_types": {n: _ONNX_TO_TRT[state["onnx_types"][n]] for n in inputs} if state.get("ort") else {},
            "host_inputs": list(state.get("host_inputs", [])),
            "shape_inputs": list(state.get("shape_inputs", [])),
        }
        return _host_memory(json.dumps(plan).encode())


def _static_dims_mismatch(network: INetworkDefinition, index: int, profile: IOptimizationProfile) -> str | None:
    """TensorRT's build error for a profile that gives a static network dimension a range."""
    for tensor in network._fake_inputs:
        shapes = profile._fake_shapes.get(tensor._fake_name)
        if shapes is None:
            continue
        for axis, size in enumerate(tensor._fake_shape):
            low, opt, high = (s[axis] for s in shapes)
            if size >= 0 and not low == opt == high == size:
                return (
                    f"{tensor._fake_name}: for dimension number {axis} in profile {index} does not match network "
                    f"definition (got min={low}, opt={opt}, max={high}), expected min=opt=max={size})."
                )
    return None


_ONNX_TO_TRT = {1: "FLOAT", 10: "HALF", 16: "BF16", 3: "INT8", 2: "UINT8", 6: "INT32", 7: "INT64", 9: "BOOL"}


# The runtime half (engines, contexts, the runtime) lives in fake_tensorrt_runtime.py.
from fake_tensorrt_runtime import (  # noqa: E402, F401
    ADDRESS_ALIGNMENT,
    DEFAULT_STREAM_WARNING,
    ICudaEngine,
    IExecutionContext,
    Runtime,
)


def as_module() -> types.ModuleType:
    """What aitune gets as `tensorrt`: a module holding only the TensorRT names (API), not the
    test controls (reset, calls, state)."""
    module = types.ModuleType("tensorrt")
    for name in API:
        setattr(module, name, globals()[name])
    return module
