"""A recording fake of the `tensorrt` Python module, for unit tests of aitune's builder and runner
glue on hosts without TensorRT (allowed by the project's testing rules). Class, enum and method
names follow the TensorRT Python API (Builder, IBuilderConfig, OnnxParser, ITimingCache, Runtime,
ICudaEngine, IExecutionContext, ILogger, IOutputAllocator). Every call lands in `calls`.

The "plan" is JSON describing the engine's I/O, so the runner side can be exercised too. With
reset(ort=True) the engine really computes on the CPU: it reads its inputs from the addresses it
was given, runs the parsed ONNX in onnxruntime and writes the results to the output addresses, so
a whole tune -> serve -> save -> load cycle runs through aitune's TensorRT glue without a GPU."""

from __future__ import annotations

import enum
import json
import types
from typing import Any

__version__ = "10.99.0"
calls: list[tuple] = []
state: dict[str, Any] = {}


def reset(**options: Any) -> None:
    """options: parse_errors (list[str]), build_fails_with (list[str] logged as errors),
    reject_cache (bool), outputs ({name: (shape, dtype name)}) for built engines."""
    calls.clear()
    state.clear()
    state.update(options)


def _record(*entry: Any) -> None:
    calls.append(entry)


class MemoryPoolType(enum.Enum):
    WORKSPACE = 0


class BuilderFlag(enum.Enum):
    FP16 = 0
    TF32 = 7


class NetworkDefinitionCreationFlag(enum.IntEnum):
    STRONGLY_TYPED = 1


class HardwareCompatibilityLevel(enum.Enum):
    NONE = 0
    AMPERE_PLUS = 1
    SAME_COMPUTE_CAPABILITY = 2


class TensorIOMode(enum.Enum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class DataType(enum.Enum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    INT64 = 9
    BF16 = 7


class ILogger:
    class Severity(enum.Enum):
        INTERNAL_ERROR = 0
        ERROR = 1
        WARNING = 2
        INFO = 3
        VERBOSE = 4

    def __init__(self) -> None:
        pass


class IOutputAllocator:
    def __init__(self) -> None:
        pass


class IHostMemory(bytes):
    pass


class ITimingCache:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def serialize(self) -> IHostMemory:
        return IHostMemory(self.data + b"+merged")


class _Input:
    def __init__(self, name: str) -> None:
        self.name = name


class INetworkDefinition:
    def __init__(self, flags: int) -> None:
        self.flags = flags
        self.inputs: list[_Input] = []

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    def get_input(self, i: int) -> _Input:
        return self.inputs[i]


class OnnxParser:
    def __init__(self, network: INetworkDefinition, logger: ILogger) -> None:
        self.network = network
        self.errors: list[str] = []

    def parse_from_file(self, path: str) -> bool:
        _record("parse_from_file", path)
        self.errors = list(state.get("parse_errors", []))
        if self.errors:
            return False
        import onnx

        model = onnx.load(path, load_external_data=False)
        initializers = {i.name for i in model.graph.initializer}
        self.network.inputs = [_Input(i.name) for i in model.graph.input if i.name not in initializers]
        state["onnx_outputs"] = [o.name for o in model.graph.output]
        state["onnx_path"] = path
        state["onnx_types"] = {v.name: v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output]}
        return True

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    def get_error(self, i: int) -> str:
        return self.errors[i]


class IOptimizationProfile:
    def __init__(self) -> None:
        self.shapes: dict[str, tuple] = {}

    def set_shape(self, name: str, min: tuple, opt: tuple, max: tuple) -> None:  # noqa: A002 - TensorRT's names
        _record("set_shape", name, tuple(min), tuple(opt), tuple(max))
        self.shapes[name] = (tuple(min), tuple(opt), tuple(max))


class IBuilderConfig:
    def __init__(self) -> None:
        self.flags: set[BuilderFlag] = set()
        self.profiles: list[IOptimizationProfile] = []
        self.timing_cache: ITimingCache | None = None

    def set_memory_pool_limit(self, pool: MemoryPoolType, size: int) -> None:
        _record("set_memory_pool_limit", pool, size)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("builder_optimization_level", "hardware_compatibility_level"):
            _record("set", name, value)
        object.__setattr__(self, name, value)

    def set_flag(self, flag: BuilderFlag) -> None:
        _record("set_flag", flag)
        self.flags.add(flag)

    def clear_flag(self, flag: BuilderFlag) -> None:
        _record("clear_flag", flag)
        self.flags.discard(flag)

    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        self.profiles.append(profile)
        return len(self.profiles) - 1

    def create_timing_cache(self, data: bytes) -> ITimingCache:
        _record("create_timing_cache", bytes(data))
        return ITimingCache(bytes(data))

    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
        _record("set_timing_cache", cache.data, ignore_mismatch)
        if cache.data and state.get("reject_cache"):
            return False
        self.timing_cache = cache
        return True

    def get_timing_cache(self) -> ITimingCache | None:
        return self.timing_cache


class Builder:
    def __init__(self, logger: ILogger) -> None:
        self.logger = logger

    def create_network(self, flags: int) -> INetworkDefinition:
        _record("create_network", flags)
        return INetworkDefinition(flags)

    def create_builder_config(self) -> IBuilderConfig:
        return IBuilderConfig()

    def create_optimization_profile(self) -> IOptimizationProfile:
        return IOptimizationProfile()

    def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> IHostMemory | None:
        _record("build_serialized_network")
        if state.get("build_fails_with"):
            for line in state["build_fails_with"]:
                self.logger.log(ILogger.Severity.ERROR, line)
            return None
        self.logger.log(ILogger.Severity.INFO, "engine built")
        outputs = state.get("outputs") or {n: (None, "FLOAT") for n in state.get("onnx_outputs", [])}
        if state.get("ort"):
            outputs = {n: (None, _ONNX_TO_TRT[state["onnx_types"][n]]) for n in state["onnx_outputs"]}
        plan = {"inputs": [i.name for i in network.inputs], "profiles": [p.shapes for p in config.profiles],
                "outputs": outputs, "onnx": state.get("onnx_path") if state.get("ort") else None,
                "input_types": {i.name: _ONNX_TO_TRT[state["onnx_types"][i.name]] for i in network.inputs}
                if state.get("ort") else {}}
        return IHostMemory(json.dumps(plan).encode())


class ICudaEngine:
    def __init__(self, plan: dict) -> None:
        self.plan = plan
        self.names = list(plan["inputs"]) + list(plan["outputs"])

    @property
    def num_io_tensors(self) -> int:
        return len(self.names)

    @property
    def num_optimization_profiles(self) -> int:
        return len(self.plan["profiles"])

    def get_tensor_name(self, i: int) -> str:
        return self.names[i]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return TensorIOMode.INPUT if name in self.plan["inputs"] else TensorIOMode.OUTPUT

    def get_tensor_dtype(self, name: str) -> DataType:
        if name in self.plan["outputs"]:
            return DataType[self.plan["outputs"][name][1]]
        return DataType[self.plan["input_types"].get(name, "FLOAT")]

    def create_execution_context(self) -> IExecutionContext:
        return IExecutionContext(self)


class IExecutionContext:
    def __init__(self, engine: ICudaEngine) -> None:
        self.engine = engine
        self.input_shapes: dict[str, tuple] = {}
        self.addresses: dict[str, int] = {}

    def set_optimization_profile_async(self, index: int, stream: int) -> bool:
        _record("set_optimization_profile_async", index, stream)
        return True

    def set_input_shape(self, name: str, shape: tuple) -> bool:
        _record("set_input_shape", name, tuple(shape))
        self.input_shapes[name] = tuple(shape)
        self._results = None
        return True

    def get_tensor_shape(self, name: str) -> tuple:
        if self.engine.plan.get("onnx"):
            return tuple(self._computed()[name].shape)
        shape = self.engine.plan["outputs"][name][0]
        if shape is None:  # default: like the first input (elementwise models)
            shape = next(iter(self.input_shapes.values()))
        return tuple(shape)

    def set_tensor_address(self, name: str, address: int) -> bool:
        _record("set_tensor_address", name, address)
        self.addresses[name] = address
        return True

    def set_output_allocator(self, name: str, allocator: Any) -> bool:
        _record("set_output_allocator", name)
        self.allocator = allocator
        return True

    def _computed(self) -> dict:
        """onnxruntime on the inputs at their bound addresses (computed once per execution)."""
        if getattr(self, "_results", None) is None:
            import onnxruntime

            plan = self.engine.plan
            if not hasattr(self.engine, "session"):
                self.engine.session = onnxruntime.InferenceSession(plan["onnx"], providers=["CPUExecutionProvider"])
            feeds = {n: _view(self.addresses[n], self.input_shapes[n], plan["input_types"][n]).numpy()
                     for n in plan["inputs"]}
            names = list(plan["outputs"])
            self._results = dict(zip(names, self.engine.session.run(names, feeds)))
        return self._results

    def execute_async_v3(self, stream: int) -> bool:
        _record("execute_async_v3", stream)
        if self.engine.plan.get("onnx"):
            import torch

            for name, value in self._computed().items():
                target = _view(self.addresses[name], value.shape, self.engine.plan["outputs"][name][1])
                target.copy_(torch.from_numpy(value))
            self._results = None
            return True
        for name, (shape, _) in self.engine.plan["outputs"].items():
            if shape is not None and any(d < 0 for d in shape):  # data-dependent: report a shape
                real = tuple(state.get("data_dependent_shape", (3,)))
                self.allocator.reallocate_output(name, 0, 4 * max(1, _numel(real)), 256)
                self.allocator.notify_shape(name, real)
        return True


_ONNX_TO_TRT = {1: "FLOAT", 10: "HALF", 16: "BF16", 3: "INT8", 6: "INT32", 7: "INT64", 9: "BOOL"}


def _view(address: int, shape: tuple, trt_type: str) -> Any:
    """A CPU tensor over `address` (what a real engine reads and writes on the device)."""
    import ctypes

    import torch

    dtype = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16, "INT8": torch.int8,
             "INT32": torch.int32, "INT64": torch.int64, "BOOL": torch.bool}[trt_type]
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


class Runtime:
    def __init__(self, logger: ILogger) -> None:
        self.logger = logger

    def deserialize_cuda_engine(self, plan: bytes) -> ICudaEngine | None:
        _record("deserialize_cuda_engine", len(plan))
        try:
            return ICudaEngine(json.loads(bytes(plan)))
        except ValueError:
            return None


def as_module() -> types.ModuleType:
    """This module, to install as sys.modules['tensorrt']."""
    import sys

    return sys.modules[__name__]
