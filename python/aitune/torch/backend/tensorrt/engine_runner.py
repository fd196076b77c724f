"""Running a TensorRT plan (docs/reference/tensorrt.md#runtime-and-timing-cache): one execution context, profile chosen
per call by the C++ rule, input addresses bound without copies, outputs allocated by aitune (or by an output
allocator when their shape depends on the data), enqueued on the caller's current stream.

Takes the `tensorrt` module as a parameter, like the builder glue, so it is unit tested with a
recording fake."""

from __future__ import annotations

import logging
import threading
from typing import Any

import torch

from aitune._native import _C
from aitune.torch.backend.tensorrt import cuda_ops
from aitune.torch.backend.tensorrt.builder import make_logger

logger = logging.getLogger("aitune")

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
            if buffer is None or buffer.numel() < size:
                buffer = torch.empty(max(size, 1), dtype=torch.uint8, device=device)
                self.buffers[tensor_name] = buffer
            return buffer.data_ptr()

        def reallocate_output_async(self, tensor_name: str, memory: int, size: int, alignment: int, stream: int) -> int:
            return self.reallocate_output(tensor_name, memory, size, alignment)

        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            self.shapes[tensor_name] = tuple(shape)

    return _Allocator()


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
        self._device = device
        self._cuda = cuda_ops.CUDA
        self._log = _trt_logger(trt)
        self._runtime = trt.Runtime(self._log)
        self.engine = self._runtime.deserialize_cuda_engine(plan)
        if self.engine is None:
            raise RuntimeError("TensorRT could not deserialize the plan (built by another TensorRT version or GPU?)")
        if len(profiles) > self.engine.num_optimization_profiles:
            raise RuntimeError(
                f"The TensorRT plan has {self.engine.num_optimization_profiles} optimization profile(s) "
                f"but its profiles file lists {len(profiles)}: they come from different builds"
            )
        self.context = self.engine.create_execution_context()
        inputs, outputs = [], []
        for i in range(self.engine.num_io_tensors):
            name = self.engine.get_tensor_name(i)
            (inputs if self.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else outputs).append(name)
        self.engine_inputs = inputs
        self.output_names = outputs
        self._bindings = [(i, name) for i, name in enumerate(input_names) if name is not None and name in inputs]
        unknown = set(inputs) - {name for _, name in self._bindings}
        if unknown:
            raise RuntimeError(f"TensorRT engine inputs {sorted(unknown)} match no tensor input of the graph")
        self._selector = _C.TrtProfileSelector(display_names, [list(p) for p in profiles])
        self._profiles = profiles
        self._display_names = display_names
        self._output_dtypes = {name: torch_dtype(self.engine.get_tensor_dtype(name)) for name in outputs}
        # An engine may take other input types than the model (autocast with keep_io_types=False).
        self._input_dtypes = {name: torch_dtype(self.engine.get_tensor_dtype(name)) for name in inputs}
        self._allocator = None
        # one context: setup + enqueue are one critical section (docs/reference/dispatch.md#threads-and-streams)
        self._lock = threading.Lock()
        self._profile = -1

    def _data_dependent(self, shapes: dict[str, tuple[int, ...]]) -> bool:
        return any(any(d < 0 for d in shape) for shape in shapes.values())

    def run(self, tensors: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """`tensors`: the graph's tensor inputs in graph order. Returns outputs by engine name."""
        index = self._selector.select([list(t.shape) for t in tensors])
        current = self._cuda.current_stream(self._device)
        stream = current.cuda_stream
        with self._lock:
            context = self.context
            if index != self._profile:
                # Only a switch TensorRT accepted is remembered: otherwise every later call would
                # run on the stale profile.
                if not context.set_optimization_profile_async(index, stream):
                    raise RuntimeError(
                        f"TensorRT refused to switch to optimization profile {index} (set_optimization_profile_async "
                        f"returned False); the engine has {self.engine.num_optimization_profiles} profile(s) and "
                        f"aitune's profiles file lists {len(self._profiles)}: the plan and its profiles do not match"
                    )
                self._profile = index
            keep = []
            for i, name in self._bindings:
                tensor = tensors[i]
                dtype = self._input_dtypes[name]
                if tensor.device != self._device or tensor.dtype != dtype or not tensor.is_contiguous():
                    tensor = tensor.to(self._device, dtype).contiguous()
                keep.append(tensor)
                if not context.set_input_shape(name, tuple(tensor.shape)):
                    low, _, high = self._profiles[index][i]
                    raise RuntimeError(
                        f"TensorRT refused input shape {list(tensor.shape)} for engine input '{name}' "
                        f"({self._display_names[i]}) in optimization profile {index} (set_input_shape returned False); "
                        f"aitune's profile allows {list(low)} to {list(high)}: the plan and its profiles do not match"
                    )
                self._set_address(name, tensor.data_ptr())
            shapes = {name: tuple(context.get_tensor_shape(name)) for name in self.output_names}
            outputs: dict[str, torch.Tensor] = {}
            dynamic = self._data_dependent(shapes)
            if dynamic and self._allocator is None:
                self._allocator = make_output_allocator(self._trt, self._device)
            for name, shape in shapes.items():
                if any(d < 0 for d in shape):
                    if not context.set_output_allocator(name, self._allocator):
                        raise RuntimeError(
                            f"TensorRT refused the output allocator for engine output '{name}' "
                            "(set_output_allocator returned False)"
                        )
                    continue
                out = torch.empty(shape, dtype=self._output_dtypes[name], device=self._device)
                outputs[name] = out
                self._set_address(name, out.data_ptr())
            if not context.execute_async_v3(stream):
                errors = "; ".join(list(self._log.errors)[-3:]) or "TensorRT logged no error"
                raise RuntimeError(f"TensorRT execution failed (execute_async_v3 returned False): {errors}")
            if dynamic:
                # Shapes arrive with the execution: the host waits for this stream only here.
                self._cuda.synchronize(self._device, current)
                for name, shape in shapes.items():
                    if any(d < 0 for d in shape):
                        real = self._allocator.shapes[name]
                        dtype = self._output_dtypes[name]
                        count = 1
                        for d in real:
                            count *= d
                        raw = self._allocator.buffers[name][: count * torch.tensor([], dtype=dtype).element_size()]
                        outputs[name] = raw.view(dtype).reshape(real).clone()
            del keep
        return outputs

    def _set_address(self, name: str, address: int) -> None:
        if not self.context.set_tensor_address(name, address):
            raise RuntimeError(
                f"TensorRT refused the address {address:#x} for engine tensor '{name}' "
                "(set_tensor_address returned False)"
            )


def _trt_logger(trt: Any) -> Any:
    return make_logger(trt)
