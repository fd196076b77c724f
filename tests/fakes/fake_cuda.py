"""A fake of the CUDA calls aitune's TensorRT runner makes (aitune.torch.backend.tensorrt.cuda_ops.TorchCuda), for
unit tests on hosts without a GPU. It keeps the contracts of the CUDA runtime that TensorRT and
the runner rely on, and refuses what CUDA refuses:

* the current device is per thread, starts at `current_device`; device_guard restores it after
  its block, set_device does not;
* each thread has a current stream per device, the legacy default stream (handle 0) until
  use_stream(stream) sets another for a block (like torch.cuda.stream);
* work is ordered per stream: every enqueue gets the next sequence number of its stream; later
  work on another stream is ordered after it only through wait() or a synchronisation
  (ordered_after() answers that question; the fake TensorRT uses it to refuse one execution
  context enqueued on two streams at once);
* capture(stream) makes `stream` capture on this thread: copies and TensorRT enqueues on it are
  recorded, not run, and FakeGraph.replay() runs them; a synchronisation of a capturing stream, a
  wait across the capture boundary and device allocations during a capture raise, as in CUDA.

CPU tensors stand for the memory of GPU `gpu_of_cpu`. Tests call reset() (fake_tensorrt.reset()
does) and install `CUDA` as aitune's cuda_ops.CUDA."""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Callable, Iterator

import torch

DEFAULT_STREAM = 0


class CudaError(RuntimeError):
    """What CUDA reports for an operation it refuses (cudaErrorStreamCaptureUnsupported, ...)."""


class FakeStream:
    def __init__(self, handle: int, device: int) -> None:
        self.cuda_stream = handle
        self.device = device

    def __repr__(self) -> str:
        return f"FakeStream({self.cuda_stream}, device={self.device})"


class FakeEvent:
    def __init__(self, cuda: FakeCuda, stream: FakeStream, point: int) -> None:
        self._cuda, self.stream, self.point = cuda, stream, point

    def synchronize(self) -> None:
        self._cuda._done_up_to(self.stream.cuda_stream, self.point)
        self._cuda.log.append(("event_synchronize", self.stream.cuda_stream))


class FakeGraph:
    """The work a capture recorded; replay() runs it again, on the state it reads then."""

    def __init__(self, stream: FakeStream) -> None:
        self.stream = stream
        self.ops: list[Callable[[], None]] = []

    def replay(self) -> None:
        for op in self.ops:
            op()


class FakeCuda:
    def __init__(self, gpu_of_cpu: int = 0, current_device: int = 0) -> None:
        self.gpu_of_cpu = gpu_of_cpu
        self.initial_device = current_device
        self.log: list[tuple] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._handles = itertools.count(16)
        self._seq: dict[int, int] = {}  # stream handle -> last sequence number enqueued
        self._done: dict[int, int] = {}  # stream handle -> sequence number known complete
        self._waits: dict[int, dict[int, int]] = {}  # waiter -> {producer: point it waited for}
        self._capturing: dict[int, FakeGraph] = {}  # stream handle -> its capture

    # -- devices ----------------------------------------------------------------------------
    def index(self, device: torch.device) -> int:
        if device.type == "cpu":
            return self.gpu_of_cpu
        return device.index if device.index is not None else self.current_device()

    def current_device(self) -> int:
        return getattr(self._local, "device", self.initial_device)

    def set_device(self, device: torch.device) -> None:
        self._local.device = self.index(device)
        self.log.append(("set_device", self._local.device))

    @contextlib.contextmanager
    def device_guard(self, device: torch.device) -> Iterator[None]:
        previous = self.current_device()
        self._local.device = self.index(device)
        try:
            yield
        finally:
            self._local.device = previous

    # -- streams ----------------------------------------------------------------------------
    def _streams(self) -> dict[int, FakeStream]:
        if not hasattr(self._local, "streams"):
            self._local.streams = {}
        return self._local.streams

    def current_stream(self, device: torch.device) -> FakeStream:
        index = self.index(device)
        return self._streams().get(index) or FakeStream(DEFAULT_STREAM, index)

    def new_stream(self, device: torch.device) -> FakeStream:
        stream = FakeStream(next(self._handles), self.index(device))
        self.log.append(("new_stream", stream.cuda_stream))
        return stream

    @contextlib.contextmanager
    def use_stream(self, stream: FakeStream) -> Iterator[FakeStream]:
        """Makes `stream` this thread's current stream of its device for the block."""
        streams = self._streams()
        previous = streams.get(stream.device)
        streams[stream.device] = stream
        try:
            yield stream
        finally:
            if previous is None:
                del streams[stream.device]
            else:
                streams[stream.device] = previous

    def is_default_stream(self, device: torch.device, stream: FakeStream) -> bool:
        return stream.cuda_stream == DEFAULT_STREAM

    def enqueue(self, handle: int) -> int:
        """Work enqueued on stream `handle`; returns its sequence number."""
        with self._lock:
            self._seq[handle] = self._seq.get(handle, 0) + 1
            return self._seq[handle]

    def wait(self, device: torch.device, waiter: FakeStream, producer: FakeStream) -> None:
        if waiter.cuda_stream == producer.cuda_stream:
            return
        if (waiter.cuda_stream in self._capturing) != (producer.cuda_stream in self._capturing):
            raise CudaError("cudaStreamWaitEvent: an event recorded outside a capture waited for inside it")
        with self._lock:
            point = self._seq.get(producer.cuda_stream, 0)
            waits = self._waits.setdefault(waiter.cuda_stream, {})
            waits[producer.cuda_stream] = max(waits.get(producer.cuda_stream, 0), point)
        self.log.append(("wait", waiter.cuda_stream, producer.cuda_stream))

    def record_event(self, device: torch.device, stream: FakeStream) -> FakeEvent:
        return FakeEvent(self, stream, self._seq.get(stream.cuda_stream, 0))

    def synchronize(self, device: torch.device, stream: FakeStream) -> None:
        if stream.cuda_stream in self._capturing:
            raise CudaError("cudaStreamSynchronize: operation not permitted when stream is capturing")
        self._done_up_to(stream.cuda_stream, self._seq.get(stream.cuda_stream, 0))
        self.log.append(("synchronize", stream.cuda_stream))

    def _done_up_to(self, handle: int, point: int) -> None:
        with self._lock:
            self._done[handle] = max(self._done.get(handle, 0), point)

    def ordered_after(self, handle: int, other: int, point: int) -> bool:
        """Whether new work on stream `handle` runs after work `point` of stream `other`."""
        if handle == other or self._done.get(other, 0) >= point:
            return True
        return self._waits.get(handle, {}).get(other, 0) >= point

    # -- capture ----------------------------------------------------------------------------
    def is_capturing(self, device: torch.device) -> bool:
        return self.current_stream(device).cuda_stream in self._capturing

    def capturing_graph(self, handle: int) -> FakeGraph | None:
        return self._capturing.get(handle)

    def any_capture_on_this_thread(self) -> bool:
        return any(handle in self._capturing for handle in (s.cuda_stream for s in self._streams().values()))

    @contextlib.contextmanager
    def capture(self, stream: FakeStream) -> Iterator[FakeGraph]:
        """Captures the work enqueued on `stream` (the current stream of its device in the block)."""
        if stream.cuda_stream == DEFAULT_STREAM:
            raise CudaError("cudaStreamBeginCapture: the legacy default stream cannot capture")
        graph = FakeGraph(stream)
        self._capturing[stream.cuda_stream] = graph
        try:
            with self.use_stream(stream):
                yield graph
        finally:
            del self._capturing[stream.cuda_stream]

    def copy(self, device: torch.device, target: torch.Tensor, source: torch.Tensor) -> None:
        graph = self._capturing.get(self.current_stream(device).cuda_stream)
        if graph is not None:
            graph.ops.append(lambda: target.copy_(source))
            return
        target.copy_(source)


CUDA = FakeCuda()


def reset(gpu_of_cpu: int = 0, current_device: int = 0) -> FakeCuda:
    """A fresh fake CUDA in `CUDA` (the same object: its state is replaced)."""
    CUDA.__init__(gpu_of_cpu=gpu_of_cpu, current_device=current_device)
    return CUDA
