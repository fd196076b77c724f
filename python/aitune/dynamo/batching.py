"""The worker's dynamic batcher (docs/serving.md, "Batching"): items of concurrent requests are
collected for at most `max_wait_s` after the first one, grouped by shape, and run in batches of
the tuned batch sizes — the shapes the tuned backends were built and measured for (a CUDA-graph
or TensorRT backend is fastest, or only valid, there). A group is padded up to the next tuned
size by repeating its last item; the padding rows are dropped from the outputs.

The model runs in one worker thread, so the event loop keeps accepting requests (which is what
fills the next batch) and calls reach the device one at a time. `stats()` counts what ran: calls
per padded batch size, items, padding rows and the model thread's busy time (docs/serving.md,
"Stats")."""

from __future__ import annotations

import asyncio
import bisect
import collections
import concurrent.futures
import dataclasses
import logging
import time
from typing import Any, Callable, Hashable, Sequence

logger = logging.getLogger("aitune.dynamo")

# run_batch(key, items, padded_size) -> one output per item (the padding's outputs dropped).
RunBatch = Callable[[Hashable, list, int], list]


def batch_plan(count: int, sizes: Sequence[int]) -> list[tuple[int, int]]:
    """(items, padded size) per call for `count` items of one shape: full calls of the largest
    tuned size, then the rest in one call padded up to the smallest tuned size that holds it."""
    sizes = sorted(set(sizes))
    largest = sizes[-1]
    plan = [(largest, largest)] * (count // largest)
    rest = count % largest
    if rest:
        plan.append((rest, sizes[bisect.bisect_left(sizes, rest)]))
    return plan


@dataclasses.dataclass
class _Waiting:
    key: Hashable
    item: Any
    future: asyncio.Future


class DynamicBatcher:
    """`sizes_for(key)` gives the tuned batch sizes for items of that shape key."""

    def __init__(self, run_batch: RunBatch, sizes_for: Callable[[Hashable], Sequence[int]], max_wait_s: float) -> None:
        self._run_batch = run_batch
        self._sizes_for = sizes_for
        self._max_wait_s = max_wait_s
        self._queue: asyncio.Queue[_Waiting] | None = None
        self._task: asyncio.Task | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="aitune-model")
        self.batches_run = 0
        self.items_run = 0
        self.padding_run = 0  # rows added to reach a tuned size (their outputs are dropped)
        self.calls_by_size: collections.Counter[int] = collections.Counter()  # padded size -> model calls
        # The model thread's time in run_batch, failed calls included. A CUDA call ends with the
        # copy of its outputs to the host, which waits for the device: this is device time plus
        # the host work around it, so busy_s / wall time bounds how busy the model keeps the GPU.
        self.busy_s = 0.0

    def stats(self) -> dict[str, Any]:
        """What ran so far; the keys of `calls_by_size` are strings, as JSON writes them."""
        return {
            "batches": self.batches_run,
            "items": self.items_run,
            "padding_rows": self.padding_run,
            "calls_by_size": {str(size): n for size, n in sorted(self.calls_by_size.items())},
            "model_busy_s": round(self.busy_s, 6),
        }

    async def submit(self, keyed_items: list[tuple[Hashable, Any]]) -> list:
        """The outputs of a request's items, in order; raises the error of a batch that failed."""
        loop = asyncio.get_running_loop()
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._task = loop.create_task(self._collect())
        futures = []
        for key, item in keyed_items:
            future = loop.create_future()
            self._queue.put_nowait(_Waiting(key, item, future))
            futures.append(future)
        return list(await asyncio.gather(*futures))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=True)

    async def _collect(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            first = await self._queue.get()
            waiting = [first]
            limit = max(self._sizes_for(first.key))
            deadline = loop.time() + self._max_wait_s
            while sum(w.key == first.key for w in waiting) < limit:
                timeout = deadline - loop.time()
                if timeout <= 0:
                    break
                try:
                    waiting.append(await asyncio.wait_for(self._queue.get(), timeout))
                except asyncio.TimeoutError:
                    break
            await self._run(waiting)

    def _timed_run_batch(self, key: Hashable, items: list, padded: int) -> list:
        start = time.perf_counter()
        try:
            return self._run_batch(key, items, padded)
        finally:  # only the model thread writes busy_s
            self.busy_s += time.perf_counter() - start

    async def _run(self, waiting: list[_Waiting]) -> None:
        loop = asyncio.get_running_loop()
        groups: dict[Hashable, list[_Waiting]] = {}
        for w in waiting:
            groups.setdefault(w.key, []).append(w)
        for key, group in groups.items():
            start = 0
            for count, padded in batch_plan(len(group), self._sizes_for(key)):
                chunk = group[start : start + count]
                start += count
                try:
                    outputs = await loop.run_in_executor(
                        self._executor, self._timed_run_batch, key, [w.item for w in chunk], padded
                    )
                except Exception as e:  # noqa: BLE001 - this batch's requests fail, the worker serves on
                    logger.warning("A batch of %d item(s) failed: %s: %s", count, type(e).__name__, e)
                    for w in chunk:
                        if not w.future.done():
                            w.future.set_exception(e)
                    continue
                self.batches_run += 1
                self.items_run += count
                self.padding_run += padded - count
                self.calls_by_size[padded] += 1
                for w, output in zip(chunk, outputs):
                    if not w.future.done():
                        w.future.set_result(output)
