"""One ONNX Runtime session served with IO binding (docs/reference/backends.md#per-backend-behaviour): torch tensors in,
torch tensors out, no numpy round trip.

Inputs are bound zero-copy by data pointer. An output whose shape follows from the input shapes
(static dims, or a dim_param that also names an input axis) is bound to a torch tensor allocated
for the call; any other output is allocated by ONNX Runtime and copied into a torch tensor.
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnxruntime as ort

import torch

from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend.onnx_runtime.onnx_runtime_config import ONNXExecutionProvider

logger = logging.getLogger("aitune")

GPU_PACKAGE_REASON = (
    "onnxruntime-gpu is not installed. Please install `onnxruntime-gpu`. execution_provider={ep} needs ONNX "
    "Runtime's CUDAExecutionProvider; the installed onnxruntime offers {available}."
)

# torch dtype <-> ONNX TensorProto element type (the ints ORT's bind_input/bind_output accept).
_ONNX_TYPES: dict[torch.dtype, int] = {
    torch.float32: 1,
    torch.uint8: 2,
    torch.int8: 3,
    torch.int16: 5,
    torch.int32: 6,
    torch.int64: 7,
    torch.bool: 9,
    torch.float16: 10,
    torch.float64: 11,
    torch.complex64: 14,
    torch.complex128: 15,
    torch.bfloat16: 16,
}
for _name, _code in (("uint16", 4), ("uint32", 12), ("uint64", 13), ("float8_e4m3fn", 17), ("float8_e5m2", 19)):
    if hasattr(torch, _name):
        _ONNX_TYPES[getattr(torch, _name)] = _code
_TORCH_TYPES = {code: dtype for dtype, code in _ONNX_TYPES.items()}


def onnx_type(dtype: torch.dtype) -> int:
    if dtype not in _ONNX_TYPES:
        raise TypeError(f"ONNX Runtime cannot take a {dtype} tensor; expected one of {sorted(map(str, _ONNX_TYPES))}")
    return _ONNX_TYPES[dtype]


def gpu_providers_missing(ep: ONNXExecutionProvider) -> str | None:
    """The reason a CUDA/TensorRT provider cannot be used (CPU-only onnxruntime), or None."""
    import onnxruntime as ort

    available = ort.get_available_providers()
    if ep is not ONNXExecutionProvider.CPU and "CUDAExecutionProvider" not in available:
        return GPU_PACKAGE_REASON.format(ep=repr(ep.value), available=available)
    return None


def providers_for(ep: ONNXExecutionProvider, device: torch.device) -> list[str | tuple[str, dict[str, object]]]:
    """ORT's provider list, most preferred first: TensorRT falls back to CUDA, CUDA to CPU."""
    import onnxruntime as ort

    if ep is ONNXExecutionProvider.CPU:
        return ["CPUExecutionProvider"]
    reason = gpu_providers_missing(ep)
    if reason:
        raise BackendUnavailableError(reason)
    index = device.index if device.index is not None else torch.cuda.current_device()
    # ORT enqueues on the stream current at session creation: the caller's stream
    # (docs/reference/backends.md#per-backend-behaviour).
    cuda_options = {"device_id": str(index), "user_compute_stream": str(torch.cuda.current_stream(index).cuda_stream)}
    providers: list[str | tuple[str, dict[str, object]]] = [
        ("CUDAExecutionProvider", cuda_options),
        "CPUExecutionProvider",
    ]
    if ep is ONNXExecutionProvider.TENSORRT:
        if "TensorrtExecutionProvider" in ort.get_available_providers():
            providers.insert(0, ("TensorrtExecutionProvider", {"device_id": str(index)}))
        else:
            logger.warning(
                "ONNX Runtime has no TensorrtExecutionProvider here; execution_provider='tensorrt' falls back to CUDA"
            )
    return providers


def _wrap_pointer(pointer: int, nbytes: int, device: torch.device) -> torch.Tensor:
    """A uint8 torch view of memory ORT owns (no copy); the caller copies out of it."""
    if device.type == "cpu":
        buffer = (ctypes.c_uint8 * nbytes).from_address(pointer)
        return torch.frombuffer(buffer, dtype=torch.uint8)

    class _CudaMemory:
        __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (pointer, False), "version": 3}

    return torch.as_tensor(_CudaMemory(), device=device)


class OrtSession:
    """An InferenceSession on one device plus the input/output layout of its model."""

    def __init__(
        self, model_path: Path, ep: ONNXExecutionProvider, device: torch.device, input_names: list[str]
    ) -> None:
        import onnxruntime as ort

        self.device = device
        self._device_type = "cuda" if device.type == "cuda" else "cpu"
        self._device_id = (
            (device.index if device.index is not None else torch.cuda.current_device()) if device.type == "cuda" else 0
        )
        self._stream = torch.cuda.current_stream(self._device_id) if device.type == "cuda" else None
        options = ort.SessionOptions()
        self.session = ort.InferenceSession(str(model_path), sess_options=options, providers=providers_for(ep, device))
        inputs = {value.name: value for value in self.session.get_inputs()}
        self.input_names = [name for name in input_names if name in inputs]
        self.input_dtypes = [_TORCH_TYPES[_element_type(inputs[name].type)] for name in self.input_names]
        self.output_names = [value.name for value in self.session.get_outputs()]
        self.output_dtypes = [_TORCH_TYPES[_element_type(value.type)] for value in self.session.get_outputs()]
        # For each output axis: an int (static), ("in", input position, axis) or None (unknown).
        axis_of: dict[str, tuple[int, int]] = {}
        for position, name in enumerate(self.input_names):
            for axis, dim in enumerate(inputs[name].shape):
                if isinstance(dim, str):
                    axis_of.setdefault(dim, (position, axis))
        self._output_dims: list[list[int | tuple[str, int, int] | None] | None] = []
        for value in self.session.get_outputs():
            dims: list[int | tuple[str, int, int] | None] = []
            for dim in value.shape:
                if isinstance(dim, int):
                    dims.append(dim)
                elif isinstance(dim, str) and dim in axis_of:
                    dims.append(axis_of[dim])
                else:
                    dims = None  # type: ignore[assignment]
                    break
            self._output_dims.append(dims)
        self._preallocate = True  # off once ORT rejects a preallocated output (a dim_param that lied)
        self.providers = self.session.get_providers()

    def _output_shape(self, index: int, inputs: list[torch.Tensor]) -> list[int] | None:
        dims = self._output_dims[index]
        if dims is None or not self._preallocate:
            return None
        shape = [d if isinstance(d, int) else int(inputs[d[0]].shape[d[1]]) for d in dims]
        return shape if all(shape) else None  # an empty output has no pointer to bind: ORT allocates it

    def run(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Runs on tensors ordered like input_names; returns outputs ordered like output_names."""
        try:
            return self._run(inputs, preallocate=self._preallocate)
        except Exception:
            if not self._preallocate or not any(d is not None for d in self._output_dims):
                raise
            self._preallocate = False
            logger.debug("ONNX Runtime rejected preallocated outputs; letting it allocate them", exc_info=True)
            return self._run(inputs, preallocate=False)

    def _run(self, inputs: list[torch.Tensor], preallocate: bool) -> list[torch.Tensor]:
        binding = self.session.io_binding()
        kept = []  # the bound memory must outlive the run
        for name, tensor, dtype in zip(self.input_names, inputs, self.input_dtypes):
            if tensor.device != self.device or tensor.dtype != dtype:
                tensor = tensor.to(self.device, dtype)
            tensor = tensor.contiguous()
            kept.append(tensor)
            binding.bind_input(
                name, self._device_type, self._device_id, onnx_type(dtype), list(tensor.shape), tensor.data_ptr()
            )
        outputs: list[torch.Tensor | None] = []
        for index, (name, dtype) in enumerate(zip(self.output_names, self.output_dtypes)):
            shape = self._output_shape(index, inputs) if preallocate else None
            if shape is None:
                binding.bind_output(name, self._device_type, self._device_id)
                outputs.append(None)
                continue
            out = torch.empty(shape, dtype=dtype, device=self.device)
            outputs.append(out)
            binding.bind_output(name, self._device_type, self._device_id, onnx_type(dtype), shape, out.data_ptr())
        if self._stream is not None and torch.cuda.current_stream(self._device_id) != self._stream:
            # ORT runs on the stream it was created with: the caller's writes must be done first.
            torch.cuda.current_stream(self._device_id).synchronize()
        self.session.run_with_iobinding(binding)
        if any(out is None for out in outputs):
            values = binding.get_outputs()
            outputs = [
                out if out is not None else self._copy_out(values[i], self.output_dtypes[i])
                for i, out in enumerate(outputs)
            ]
        return outputs  # type: ignore[return-value]

    def _copy_out(self, value: ort.OrtValue, dtype: torch.dtype) -> torch.Tensor:
        shape = list(value.shape())
        out = torch.empty(shape, dtype=dtype, device=self.device)
        nbytes = out.numel() * out.element_size()
        if nbytes:
            out.view(-1).view(torch.uint8).copy_(_wrap_pointer(value.data_ptr(), nbytes, self.device))
        return out


def _element_type(type_string: str) -> int:
    """ORT's 'tensor(float16)' -> ONNX element type int."""
    import onnx

    name = type_string.removeprefix("tensor(").removesuffix(")").upper()
    code = getattr(onnx.TensorProto, name, None)
    if code is None or code not in _TORCH_TYPES:
        raise TypeError(f"ONNX Runtime tensor type {type_string} has no torch equivalent")
    return code
