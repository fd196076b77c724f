"""The CUDA calls the TensorRT engine runner makes (docs/reference/tensorrt.md#runtime-and-timing-cache): the device
guard, streams and events, stream-capture state and the copies it enqueues, through torch.

The runner takes them from `CUDA` (replaced by tests/fakes/fake_cuda.py in the unit tests, so the
device, stream and capture contracts are tested without a GPU). On a CPU device every call is a
no-op or a plain copy: there is no stream and nothing to guard."""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager

import torch

# The handles of CUDA's default streams: the legacy default stream (0, also cudaStreamLegacy = 1)
# and the per-thread default stream (2). TensorRT synchronises the device around every enqueue on
# one of them (execute_async_v3's docstring), so the runner never enqueues there.
DEFAULT_STREAM_HANDLES = frozenset({0, 1, 2})


class HostStream:
    """The stream of a CPU device: work runs at once, handle 0, nothing to wait for."""

    cuda_stream = 0

    def synchronize(self) -> None:
        pass


class HostEvent:
    def synchronize(self) -> None:
        pass


class TorchCuda:
    """CUDA through torch. Streams are torch.cuda.Stream objects (handle: `.cuda_stream`)."""

    @staticmethod
    def _is_cuda(device: torch.device) -> bool:
        return device.type == "cuda"

    def device_guard(self, device: torch.device) -> ContextManager:
        """Makes `device` current for the block and restores the caller's device after it."""
        return torch.cuda.device(device) if self._is_cuda(device) else contextlib.nullcontext()

    def current_stream(self, device: torch.device) -> Any:
        return torch.cuda.current_stream(device) if self._is_cuda(device) else HostStream()

    def new_stream(self, device: torch.device) -> Any:
        return torch.cuda.Stream(device) if self._is_cuda(device) else HostStream()

    def is_default_stream(self, device: torch.device, stream: Any) -> bool:
        return self._is_cuda(device) and stream.cuda_stream in DEFAULT_STREAM_HANDLES

    def wait(self, device: torch.device, waiter: Any, producer: Any) -> None:
        """`waiter` waits (on the device, no host sync) for the work enqueued on `producer` so far."""
        if self._is_cuda(device) and waiter.cuda_stream != producer.cuda_stream:
            waiter.wait_stream(producer)

    def record_event(self, device: torch.device, stream: Any) -> Any:
        if not self._is_cuda(device):
            return HostEvent()
        event = torch.cuda.Event()
        event.record(stream)
        return event

    def synchronize(self, device: torch.device, stream: Any) -> None:
        stream.synchronize()

    def is_capturing(self, device: torch.device) -> bool:
        """Whether the current stream of `device` is capturing a CUDA graph."""
        return self._is_cuda(device) and torch.cuda.is_current_stream_capturing()

    def copy(self, device: torch.device, target: torch.Tensor, source: torch.Tensor) -> None:
        """Enqueues `target.copy_(source)` on the current stream (converting dtype and device); a
        capture records it, so a replay copies again."""
        target.copy_(source, non_blocking=True)


CUDA: Any = TorchCuda()
