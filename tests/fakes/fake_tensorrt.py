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
a whole tune -> serve -> save -> load cycle runs through aitune's TensorRT glue without a GPU."""

from __future__ import annotations

import ctypes
import json
import types
from typing import Any

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
    data_dependent_shape (the shape a data-dependent output reports), ort (compute with onnxruntime)."""
    calls.clear()
    state.clear()
    state.update(options)


def _record(*entry: Any) -> None:
    calls.append(entry)


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
            self._fake_logger.log(ILogger.Severity.ERROR, line)

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
        self._fake_logger.log(ILogger.Severity.INFO, "engine built")
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
        }
        return _host_memory(json.dumps(plan).encode())


class ICudaEngine(TrtObject):
    def _num_io_tensors(self) -> int:
        return len(self._fake_names)

    num_io_tensors = api_property(_num_io_tensors)

    def _num_optimization_profiles(self) -> int:
        return max(1, len(self._fake_plan["profiles"]))  # an engine always has a default profile

    num_optimization_profiles = api_property(_num_optimization_profiles)

    @api
    def get_tensor_name(self, index: int) -> str:
        return self._fake_names[index]

    @api
    def get_tensor_mode(self, name: str) -> TensorIOMode:
        if name in self._fake_plan["inputs"]:
            return TensorIOMode.INPUT
        return TensorIOMode.OUTPUT if name in self._fake_plan["outputs"] else TensorIOMode.NONE

    @api
    def get_tensor_dtype(self, name: str) -> DataType:
        if name in self._fake_plan["outputs"]:
            return DataType[self._fake_plan["outputs"][name][1]]
        return DataType[self._fake_plan["input_types"].get(name, "FLOAT")]

    @api
    def create_execution_context(self) -> IExecutionContext:
        return IExecutionContext._fake_new(
            engine=self, input_shapes={}, addresses={}, allocators={}, profile=0, results=None
        )


class IExecutionContext(TrtObject):
    @api
    def set_optimization_profile_async(self, profile_index: int, stream_handle: int) -> bool:
        _record("set_optimization_profile_async", profile_index, stream_handle)
        if not 0 <= profile_index < self._fake_engine.num_optimization_profiles:
            return False
        self._fake_profile = profile_index
        self._fake_input_shapes.clear()  # a profile switch invalidates the input shapes
        return True

    @api
    def set_input_shape(self, name: str, shape: tuple | list | Dims) -> bool:
        shape = tuple(shape)
        _record("set_input_shape", name, shape)
        plan = self._fake_engine._fake_plan
        if name not in plan["inputs"]:
            return False
        if plan["profiles"]:
            low, _, high = plan["profiles"][self._fake_profile].get(name, (shape, shape, shape))
            if len(shape) != len(low) or not all(a <= d <= b for a, d, b in zip(low, shape, high)):
                return False  # outside the active profile
        self._fake_input_shapes[name] = shape
        self._fake_results = None
        return True

    @api
    def get_tensor_shape(self, name: str) -> Dims:
        plan = self._fake_engine._fake_plan
        if name in plan["inputs"]:
            return Dims(self._fake_input_shapes.get(name, ()))
        if plan.get("onnx"):
            return Dims(self._computed()[name].shape)
        shape = plan["outputs"][name][0]
        if shape is None:  # default: like the first input (elementwise models)
            shape = next(iter(self._fake_input_shapes.values()))
        return Dims(shape)

    @api
    def set_tensor_address(self, name: str, memory: int) -> bool:
        _record("set_tensor_address", name, memory)
        if name not in self._fake_engine._fake_names:
            return False
        self._fake_addresses[name] = memory
        return True

    @api
    def set_output_allocator(self, name: str, output_allocator: IOutputAllocator | None) -> bool:
        _record("set_output_allocator", name)
        if name not in self._fake_engine._fake_plan["outputs"]:
            return False
        self._fake_allocators[name] = output_allocator
        return True

    def _computed(self) -> dict:
        """onnxruntime on the inputs at their bound addresses (computed once per execution)."""
        if self._fake_results is None:
            import onnxruntime

            engine = self._fake_engine
            plan = engine._fake_plan
            if not hasattr(engine, "_fake_session"):
                engine._fake_session = onnxruntime.InferenceSession(plan["onnx"], providers=["CPUExecutionProvider"])
            feeds = {
                n: _view(self._fake_addresses[n], self._fake_input_shapes[n], plan["input_types"][n]).numpy()
                for n in plan["inputs"]
            }
            names = list(plan["outputs"])
            self._fake_results = dict(zip(names, engine._fake_session.run(names, feeds)))
        return self._fake_results

    @api
    def execute_async_v3(self, stream_handle: int) -> bool:
        _record("execute_async_v3", stream_handle)
        plan = self._fake_engine._fake_plan
        unbound = [n for n in plan["inputs"] if n not in self._fake_input_shapes or n not in self._fake_addresses]
        unbound += [n for n in plan["outputs"] if n not in self._fake_addresses and n not in self._fake_allocators]
        if unbound:
            return False  # TensorRT logs which tensors have no shape or address
        if plan.get("onnx"):
            import torch

            for name, value in self._computed().items():
                target = _view(self._fake_addresses[name], value.shape, plan["outputs"][name][1])
                target.copy_(torch.from_numpy(value))
            self._fake_results = None
            return True
        for name, (shape, _) in plan["outputs"].items():
            if shape is not None and any(d < 0 for d in shape):  # data-dependent: report a shape
                real = tuple(state.get("data_dependent_shape", (3,)))
                allocator = self._fake_allocators[name]
                allocator.reallocate_output_async(name, 0, 4 * max(1, _numel(real)), 256, stream_handle)
                allocator.notify_shape(name, Dims(real))
        return True


_ONNX_TO_TRT = {1: "FLOAT", 10: "HALF", 16: "BF16", 3: "INT8", 2: "UINT8", 6: "INT32", 7: "INT64", 9: "BOOL"}


def _view(address: int, shape: tuple, trt_type: str) -> Any:
    """A CPU tensor over `address` (what a real engine reads and writes on the device)."""
    import torch

    dtype = {
        "FLOAT": torch.float32,
        "HALF": torch.float16,
        "BF16": torch.bfloat16,
        "INT8": torch.int8,
        "UINT8": torch.uint8,
        "INT32": torch.int32,
        "INT64": torch.int64,
        "BOOL": torch.bool,
    }[trt_type]
    count = _numel(tuple(shape))
    if count == 0:
        return torch.empty(tuple(shape), dtype=dtype)
    size = count * torch.empty((), dtype=dtype).element_size()
    buffer = (ctypes.c_char * size).from_address(address)
    return torch.frombuffer(buffer, dtype=dtype, count=count).reshape(tuple(shape))


def _numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class Runtime(TrtObject):
    @api
    def __init__(self, logger: ILogger) -> None:
        self._fake_logger = logger

    @api
    def deserialize_cuda_engine(self, serialized_engine: Buffer) -> ICudaEngine | None:  # noqa: F821
        data = bytes(memoryview(serialized_engine))
        _record("deserialize_cuda_engine", len(data))
        try:
            plan = json.loads(data)
        except ValueError:
            return None
        return ICudaEngine._fake_new(
            plan=plan, names=list(plan["inputs"]) + list(plan["outputs"]), logger=self._fake_logger
        )


def as_module() -> types.ModuleType:
    """What aitune gets as `tensorrt`: a module holding only the TensorRT names (API), not the
    test controls (reset, calls, state)."""
    module = types.ModuleType("tensorrt")
    for name in API:
        setattr(module, name, globals()[name])
    return module
