"""Running a TensorRT plan (docs/reference/tensorrt.md#runtime-and-timing-cache).

The engine is deserialized, its execution contexts created and every call enqueued with the
runner's device current (TensorRT binds an engine to the device current at deserialization). A
context is never shared where TensorRT forbids it: each CUDA stream that calls the runner gets its
own context (one context enqueued on two streams at once is undefined), and each captured CUDA
graph owns the context it was captured with (a captured enqueue reads its context's state, so a
later call or capture of another shape must not touch it). A call from a default stream runs on
the runner's private stream, forked from and joined back into the caller's stream. Inputs are
bound without copies when they are on the device, of the engine's dtype, contiguous and 256-byte
aligned (setTensorAddress's requirement), else through an aligned copy; outputs are allocated by
aitune, or by an output allocator when their shape depends on the data.

Takes the `tensorrt` module as a parameter and its CUDA calls from cuda_ops.CUDA, so it is unit
tested with the fakes of tests/fakes."""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from aitune._native import _C
from aitune.torch.backend.tensorrt import cuda_ops
from aitune.torch.backend.tensorrt.builder import process_logger

logger = logging.getLogger("aitune")

ADDRESS_ALIGNMENT = 256  # bytes; TensorRT's setTensorAddress requirement
MAX_STREAM_CONTEXTS = 8  # contexts kept for distinct calling streams (least recently used dropped)
CAPTURE_NEEDS_WARMUP = (
    "TensorRT cannot capture this call in a CUDA graph: a captured context must have run these input "
    "shapes once before the capture (TensorRT initialises a context's state for new shapes in its first "
    "enqueue, which a capture cannot record); expected an ordinary call with the same input tensors "
    "before the capture, got none"
)

_TRT_TO_TORCH = {
    "FLOAT": torch.float32,
    "HALF": torch.float16,
    "BF16": torch.bfloat16,
    "INT8": torch.int8,
    "INT32": torch.int32,
    "INT64": torch.int64,
    "BOOL": torch.bool,
    "UINT8": torch.uint8,
    "FP8": torch.float8_e4m3fn,
}
if hasattr(torch, "float8_e8m0fnu"):  # TensorRT's E8M0 scale type (MX formats)
    _TRT_TO_TORCH["E8M0"] = torch.float8_e8m0fnu


def torch_dtype(trt_dtype: Any) -> torch.dtype:
    name = getattr(trt_dtype, "name", None) or str(trt_dtype).rsplit(".", 1)[-1]
    if name not in _TRT_TO_TORCH:
        raise RuntimeError(f"TensorRT tensor type {trt_dtype} has no torch equivalent")
    return _TRT_TO_TORCH[name]


def aligned_empty(
    shape: Any, dtype: torch.dtype, device: torch.device, alignment: int = ADDRESS_ALIGNMENT
) -> torch.Tensor:
    """torch.empty whose data_ptr() is a multiple of `alignment` (CUDA allocations already are;
    a CPU one or a larger alignment gets an offset view into a larger byte buffer)."""
    tensor = torch.empty(tuple(shape), dtype=dtype, device=device)
    if tensor.data_ptr() % alignment == 0:
        return tensor
    size = tensor.numel() * tensor.element_size()
    raw = torch.empty(size + alignment, dtype=torch.uint8, device=device)
    offset = (-raw.data_ptr()) % alignment
    return raw[offset : offset + size].view(dtype).view(tuple(shape))


def make_output_allocator(trt: Any, device: torch.device) -> Any:
    """An IOutputAllocator backed by torch tensors, for outputs whose shape is known only after
    execution."""

    class _Allocator(trt.IOutputAllocator):
        def __init__(self) -> None:
            trt.IOutputAllocator.__init__(self)
            self.buffers: dict[str, torch.Tensor] = {}
            self.shapes: dict[str, tuple[int, ...]] = {}

        def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
            buffer = self.buffers.get(tensor_name)
            alignment = max(alignment, ADDRESS_ALIGNMENT)
            if buffer is None or buffer.numel() < size or buffer.data_ptr() % alignment:
                buffer = aligned_empty((max(size, 1),), torch.uint8, device, alignment)
                self.buffers[tensor_name] = buffer
            return buffer.data_ptr()

        def reallocate_output_async(self, tensor_name: str, memory: int, size: int, alignment: int, stream: int) -> int:
            return self.reallocate_output(tensor_name, memory, size, alignment)

        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            self.shapes[tensor_name] = tuple(shape)

    return _Allocator()


@dataclasses.dataclass(eq=False)
class _Context:
    """An execution context and what the runner knows of its state."""

    context: Any
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    profile: int = -1  # the optimization profile TensorRT accepted last
    allocator: Any = None  # its output allocator (data-dependent output shapes)
    event: Any = None  # recorded after its last enqueue: waited for before the context is dropped
    last_call: tuple | None = None  # (shape, dtype, address) of each input of its last ordinary call
    owners: list = dataclasses.field(default_factory=list)  # a graph's input storages (weak)
    keep: list = dataclasses.field(default_factory=list)  # tensors a captured graph reads


def _call_key(tensors: list[torch.Tensor]) -> tuple:
    return tuple((tuple(t.shape), t.dtype, t.data_ptr()) for t in tensors)


class EngineRunner:
    """Serves one deserialized engine. `input_names[i]` is the engine input fed by graph tensor
    input i (None when the export dropped it); `profiles` are the build's, in graph input order."""

    def __init__(
        self,
        trt: Any,
        plan: bytes,
        device: torch.device,
        input_names: list[str | None],
        profiles: list,
        display_names: list[str],
    ) -> None:
        self._trt = trt
        self._cuda = cuda_ops.CUDA
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self._device = device
        self._log = process_logger(trt)
        with self._cuda.device_guard(device):
            self._runtime = trt.Runtime(self._log)
            mark = self._log.errors.mark()
            self.engine = self._runtime.deserialize_cuda_engine(plan)
            if self.engine is None:
                errors = "; ".join(self._log.errors.since(mark)[-3:]) or "TensorRT logged no error"
                raise RuntimeError(
                    f"TensorRT could not deserialize the plan for {device}: {errors}; expected a plan built by "
                    f"this TensorRT ({getattr(trt, '__version__', '?')}) for this GPU"
                )
            self._read_io(input_names, profiles)
            # Created now, so a device without the memory for it fails at load, not at the first call.
            self._spare: _Context | None = _Context(self._new_context())
        self._selector = _C.TrtProfileSelector(display_names, [list(p) for p in profiles])
        self._profiles = profiles
        self._display_names = display_names
        self._pool_lock = threading.Lock()  # guards the context pools and the private stream
        self._streams: collections.OrderedDict[int, _Context] = collections.OrderedDict()
        self._graphs: list[_Context] = []
        self._private_stream: Any = None

    def _read_io(self, input_names: list[str | None], profiles: list) -> None:
        engine, trt = self.engine, self._trt
        if len(profiles) > engine.num_optimization_profiles:
            raise RuntimeError(
                f"The TensorRT plan has {engine.num_optimization_profiles} optimization profile(s) "
                f"but its profiles file lists {len(profiles)}: they come from different builds"
            )
        inputs, outputs = [], []
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            (inputs if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else outputs).append(name)
        for name in inputs + outputs:
            self._refuse_host_tensor(name)
        self.engine_inputs = inputs
        self.output_names = outputs
        self._bindings = [(i, name) for i, name in enumerate(input_names) if name is not None and name in inputs]
        unknown = set(inputs) - {name for _, name in self._bindings}
        if unknown:
            raise RuntimeError(f"TensorRT engine inputs {sorted(unknown)} match no tensor input of the graph")
        self._output_dtypes = {name: torch_dtype(engine.get_tensor_dtype(name)) for name in outputs}
        # An engine may take other input types than the model (autocast with keep_io_types=False).
        self._input_dtypes = {name: torch_dtype(engine.get_tensor_dtype(name)) for name in inputs}

    def _refuse_host_tensor(self, name: str) -> None:
        """The runner binds device buffers only: a shape tensor (read by TensorRT's shape inference
        on the host) or a host-memory tensor would be read through a device pointer."""
        engine = self.engine
        location = engine.get_tensor_location(name)
        shape_tensor = engine.is_shape_inference_io(name)
        if not shape_tensor and location != self._trt.TensorLocation.HOST:
            return
        kind = "a shape tensor (is_shape_inference_io)" if shape_tensor else "in host memory"
        got = "a shape tensor, whose values TensorRT reads on the host" if shape_tensor else f"{location}"
        raise RuntimeError(
            f"TensorRT engine tensor '{name}' is {kind}: aitune binds device buffers only; expected a device "
            f"tensor (TensorLocation.DEVICE, not a shape tensor), got {got}. Export the model so that integer "
            "inputs feeding shapes are constants, or serve it with another backend"
        )

    def _new_context(self) -> Any:
        mark = self._log.errors.mark()
        context = self.engine.create_execution_context()
        if context is None:  # TensorRT's answer when it cannot allocate the context's device memory
            errors = "; ".join(self._log.errors.since(mark)[-3:]) or "TensorRT logged no error"
            raise torch.OutOfMemoryError(
                f"TensorRT could not create an execution context on {self._device}: create_execution_context "
                f"returned None, which means out of memory for the context's device memory; expected a context, "
                f"got None ({errors})"
            )
        return context

    # -- calls --------------------------------------------------------------------------------
    def run(self, tensors: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """`tensors`: the graph's tensor inputs in graph order. Returns outputs by engine name."""
        index = self._selector.select([list(t.shape) for t in tensors])
        cuda, device = self._cuda, self._device
        with cuda.device_guard(device):
            caller = cuda.current_stream(device)
            if cuda.is_capturing(device):
                return self._run_captured(index, tensors, caller)
            stream = self._stream_for(caller)
            slot = self._stream_context(stream)
            with slot.lock:
                bound = self._prepare_inputs(tensors)  # copies run on the caller's stream
                if stream is not caller:
                    cuda.wait(device, stream, caller)  # fork: the private stream waits for the caller's work
                outputs = self._enqueue(slot, index, bound, stream, capturing=False)
                if stream is not caller:
                    cuda.wait(device, caller, stream)  # join: the caller's later work waits for the engine
                slot.event = cuda.record_event(device, stream)
                slot.last_call = _call_key(tensors)
            return outputs

    def _stream_for(self, caller: Any) -> Any:
        """The caller's stream, or the runner's private stream when the caller is on a default stream
        (TensorRT synchronises the device around every enqueue there)."""
        if not self._cuda.is_default_stream(self._device, caller):
            return caller
        with self._pool_lock:
            if self._private_stream is None:
                self._private_stream = self._cuda.new_stream(self._device)
            return self._private_stream

    def _stream_context(self, stream: Any) -> _Context:
        """The context of `stream`: created on its first call; beyond MAX_STREAM_CONTEXTS streams the
        least recently used one is dropped once its last work is done."""
        handle = stream.cuda_stream
        evicted = None
        with self._pool_lock:
            slot = self._streams.get(handle)
            if slot is not None:
                self._streams.move_to_end(handle)
                return slot
            self._prune_graph_contexts()
            slot, self._spare = self._spare or _Context(self._new_context()), None
            self._streams[handle] = slot
            if len(self._streams) > MAX_STREAM_CONTEXTS:
                evicted = self._streams.popitem(last=False)[1]
        if evicted is not None:
            with evicted.lock:
                if evicted.event is not None:
                    evicted.event.synchronize()  # a context must outlive the work enqueued with it
        return slot

    def _run_captured(self, index: int, tensors: list[torch.Tensor], stream: Any) -> dict[str, torch.Tensor]:
        """A call inside a CUDA-graph capture: the context that ran these very inputs last becomes the
        graph's own, so no other call changes the state the graph replays."""
        slot = self._graph_context(tensors, stream)
        with slot.lock:
            if slot.last_call != _call_key(tensors):  # another thread used it since it was chosen
                raise RuntimeError(CAPTURE_NEEDS_WARMUP)
            bound = self._prepare_inputs(tensors)  # the capture records the copies
            outputs = self._enqueue(slot, index, bound, stream, capturing=True)
            slot.keep = [tensor for i, _, tensor in bound if tensor is not tensors[i]]  # its copies
            slot.last_call = None
        return outputs

    def _graph_context(self, tensors: list[torch.Tensor], stream: Any) -> _Context:
        key = _call_key(tensors)
        with self._pool_lock:
            self._prune_graph_contexts()
            handle = stream.cuda_stream
            candidates = [handle] if handle in self._streams else []
            candidates += [h for h in self._streams if h != handle]
            chosen = next((h for h in candidates if self._streams[h].last_call == key), None)
            if chosen is None:
                raise RuntimeError(CAPTURE_NEEDS_WARMUP)
            slot = self._streams.pop(chosen)  # that stream's next call gets a new context
            # The graph lives as long as its static inputs (the CUDA-graph runner owns both).
            slot.owners = [StorageWeakRef(t.untyped_storage()) for t in tensors]
            self._graphs.append(slot)
        return slot

    def _prune_graph_contexts(self) -> None:
        """Drops the contexts of graphs whose input buffers are gone (the graph was released; the
        CUDA-graph runner waits for a graph's last replay before it releases it). A graph without
        tensor inputs keeps its context as long as the runner."""
        self._graphs = [g for g in self._graphs if not g.owners or not all(ref.expired() for ref in g.owners)]

    # -- one execution -----------------------------------------------------------------------
    def _prepare_inputs(self, tensors: list[torch.Tensor]) -> list[tuple[int, str, torch.Tensor]]:
        """(graph index, engine name, tensor to bind) per engine input: the caller's tensor, or an
        aligned copy when it is elsewhere, of another dtype, strided or not 256-byte aligned."""
        bound = []
        for i, name in self._bindings:
            tensor = tensors[i]
            dtype = self._input_dtypes[name]
            if (
                tensor.device != self._device
                or tensor.dtype != dtype
                or not tensor.is_contiguous()
                or tensor.data_ptr() % ADDRESS_ALIGNMENT
            ):
                copy = aligned_empty(tensor.shape, dtype, self._device)
                self._cuda.copy(self._device, copy, tensor)
                tensor = copy
            bound.append((i, name, tensor))
        return bound

    def _enqueue(self, slot: _Context, index: int, bound: list, stream: Any, capturing: bool) -> dict:
        context, handle = slot.context, stream.cuda_stream
        if index != slot.profile:
            # Only a switch TensorRT accepted is remembered: otherwise every later call would run on
            # the stale profile.
            if not context.set_optimization_profile_async(index, handle):
                raise RuntimeError(
                    f"TensorRT refused to switch to optimization profile {index} (set_optimization_profile_async "
                    f"returned False); the engine has {self.engine.num_optimization_profiles} profile(s) and "
                    f"aitune's profiles file lists {len(self._profiles)}: the plan and its profiles do not match"
                )
            slot.profile = index
        for i, name, tensor in bound:
            if not context.set_input_shape(name, tuple(tensor.shape)):
                low, _, high = self._profiles[index][i]
                raise RuntimeError(
                    f"TensorRT refused input shape {list(tensor.shape)} for engine input '{name}' "
                    f"({self._display_names[i]}) in optimization profile {index} (set_input_shape returned False); "
                    f"aitune's profile allows {list(low)} to {list(high)}: the plan and its profiles do not match"
                )
            self._set_address(context, name, tensor.data_ptr())
        shapes = {name: tuple(context.get_tensor_shape(name)) for name in self.output_names}
        dynamic = [name for name, shape in shapes.items() if any(d < 0 for d in shape)]
        if dynamic and capturing:
            raise RuntimeError(
                f"TensorRT outputs {dynamic} have data-dependent shapes: reading them needs a host "
                "synchronisation, which a CUDA-graph capture cannot contain; serve this engine without CUDA graphs"
            )
        outputs = self._bind_outputs(slot, shapes, dynamic)
        mark = self._log.errors.mark()
        if not context.execute_async_v3(handle):
            errors = "; ".join(self._log.errors.since(mark)[-3:]) or "TensorRT logged no error"
            raise RuntimeError(f"TensorRT execution failed (execute_async_v3 returned False): {errors}")
        if dynamic:
            # Shapes arrive with the execution: the host waits for this stream only here.
            self._cuda.synchronize(self._device, stream)
            for name in dynamic:
                outputs[name] = self._read_allocated(slot, name)
        return outputs

    def _bind_outputs(self, slot: _Context, shapes: dict, dynamic: list[str]) -> dict[str, torch.Tensor]:
        if dynamic and slot.allocator is None:
            slot.allocator = make_output_allocator(self._trt, self._device)
        outputs: dict[str, torch.Tensor] = {}
        for name, shape in shapes.items():
            if name in dynamic:
                if not slot.context.set_output_allocator(name, slot.allocator):
                    raise RuntimeError(
                        f"TensorRT refused the output allocator for engine output '{name}' "
                        "(set_output_allocator returned False)"
                    )
                continue
            out = aligned_empty(shape, self._output_dtypes[name], self._device)
            outputs[name] = out
            self._set_address(slot.context, name, out.data_ptr())
        return outputs

    def _read_allocated(self, slot: _Context, name: str) -> torch.Tensor:
        real = slot.allocator.shapes[name]
        dtype = self._output_dtypes[name]
        count = 1
        for d in real:
            count *= d
        raw = slot.allocator.buffers[name][: count * torch.tensor([], dtype=dtype).element_size()]
        return raw.view(dtype).reshape(real).clone()

    @staticmethod
    def _set_address(context: Any, name: str, address: int) -> None:
        if not context.set_tensor_address(name, address):
            raise RuntimeError(
                f"TensorRT refused the address {address:#x} for engine tensor '{name}' "
                "(set_tensor_address returned False)"
            )
