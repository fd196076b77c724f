"""The runtime half of the fake `tensorrt` (fake_tensorrt.py holds the module, its controls and its
contracts): ICudaEngine, IExecutionContext and Runtime, with the device, stream, alignment and
capture rules of fake_cuda.py. Its classes are part of the fake module (fake_trt_strict.FAKE_MODULES)
and are judged by the conformance tier like the others."""

from __future__ import annotations

import ctypes
import json
from typing import Any

import fake_cuda
from fake_tensorrt import (
    DataType,
    Dims,
    ILogger,
    IOutputAllocator,
    TensorIOMode,
    TensorLocation,
    _error,
    _log,
    _record,
    _use_logger,
    state,
)
from fake_trt_strict import TrtObject, api, api_property


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
    def get_tensor_location(self, name: str) -> TensorLocation:
        return TensorLocation.HOST if name in self._fake_plan.get("host_inputs", ()) else TensorLocation.DEVICE

    @api
    def is_shape_inference_io(self, name: str) -> bool:
        return name in self._fake_plan.get("shape_inputs", ())

    @api
    def get_tensor_dtype(self, name: str) -> DataType:
        if name in self._fake_plan["outputs"]:
            return DataType[self._fake_plan["outputs"][name][1]]
        return DataType[self._fake_plan["input_types"].get(name, "FLOAT")]

    @api
    def create_execution_context(self) -> IExecutionContext | None:
        _record("create_execution_context")
        current = fake_cuda.CUDA.current_device()
        if current != self._fake_device:
            _error(
                f"createExecutionContext: the engine was deserialized on GPU {self._fake_device}, GPU {current} is current"
            )
            return None
        if fake_cuda.CUDA.any_capture_on_this_thread():
            _error("createExecutionContext: cudaMalloc is not permitted while a stream is capturing")
            return None
        if state.get("context_oom"):
            _error("createExecutionContext: out of memory allocating the context's device memory")
            return None
        return IExecutionContext._fake_new(
            engine=self, input_shapes={}, addresses={}, allocators={}, profile=0, results=None, last_enqueue=None
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
        if memory % ADDRESS_ALIGNMENT:
            _error(
                f"setTensorAddress: the address {memory:#x} of tensor '{name}' is not {ADDRESS_ALIGNMENT}-byte aligned"
            )
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
        refusal = self._runtime_refusal(stream_handle)
        if refusal:
            _error(refusal)
            return False
        if stream_handle == fake_cuda.DEFAULT_STREAM:
            _log(ILogger.Severity.WARNING, DEFAULT_STREAM_WARNING)
        graph = fake_cuda.CUDA.capturing_graph(stream_handle)
        if graph is not None:
            graph.ops.append(lambda: self._execute(stream_handle))  # reads the context's state when replayed
            return True
        return self._execute(stream_handle)

    def _runtime_refusal(self, stream_handle: int) -> str | None:
        """Why TensorRT cannot run this context now: another device, another device's buffers, or
        unfinished work of this context on another stream."""
        cuda = fake_cuda.CUDA
        device = self._fake_engine._fake_device
        if cuda.current_device() != device:
            return f"enqueueV3: the engine was deserialized on GPU {device}, GPU {cuda.current_device()} is current"
        if cuda.gpu_of_cpu != device:
            return f"enqueueV3: the tensors' memory is on GPU {cuda.gpu_of_cpu}, the engine on GPU {device}"
        if self._fake_last_enqueue is not None:
            other, point = self._fake_last_enqueue
            if not cuda.ordered_after(stream_handle, other, point):
                return (
                    f"enqueueV3 on stream {stream_handle}: this context's work on stream {other} may still run "
                    "(one execution context per stream)"
                )
        self._fake_last_enqueue = (stream_handle, cuda.enqueue(stream_handle))
        return None

    def _execute(self, stream_handle: int) -> bool:
        plan = self._fake_engine._fake_plan
        if plan.get("onnx"):
            self._fake_results = None  # computed from the memory at the bound addresses now (a replay's too)
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


ADDRESS_ALIGNMENT = 256
DEFAULT_STREAM_WARNING = (
    "Using default stream in enqueueV3() may lead to performance issues due to additional calls to "
    "cudaStreamSynchronize() by TensorRT to ensure correct synchronization. Please use non-default stream instead."
)


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
        _use_logger(logger)

    @api
    def deserialize_cuda_engine(self, serialized_engine: Buffer) -> ICudaEngine | None:  # noqa: F821
        data = bytes(memoryview(serialized_engine))
        _record("deserialize_cuda_engine", len(data))
        try:
            plan = json.loads(data)
        except ValueError:
            return None
        return ICudaEngine._fake_new(
            plan=plan,
            names=list(plan["inputs"]) + list(plan["outputs"]),
            logger=self._fake_logger,
            device=fake_cuda.CUDA.current_device(),
        )
