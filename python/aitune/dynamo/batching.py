"""The worker's dynamic batcher (docs/serving.md, "Batching"): items of concurrent requests run
in batches of the tuned batch sizes, the shapes the tuned backends were built and measured for (a
CUDA-graph or TensorRT backend is fastest, or only valid, there). Items are grouped by shape key;
a batch is padded up to the next tuned size by repeating its last item, and the padding rows'
outputs are dropped.

Batches run in one model thread of their own, so calls reach the device one at a time, and the event
loop keeps accepting requests while a batch runs: collecting overlaps the model call. Whenever the
model thread is free, the collector takes what is queued at once, up to the largest tuned size of
one shape. It waits (for at most `max_wait_s` after the oldest queued item arrived) only when
waiting can help: the model is free, fewer items than the largest tuned size are queued, and more
are expected, because fewer requests arrived since the last call ended than that call answered (in
a closed loop, each answered client sends its next request). A steady single client therefore never
waits; items that already waited `max_wait_s` behind a running call go at once.
`max_wait_s=0` turns batching off: every item is a model call of its own.

A request that finds the batcher idle (nothing queued, no call running) and the model idle for at
least as long as its last call took runs at once on the event loop's own thread: no collector turn,
no hop to the model thread and back, a part of a lone client's latency. Calls still run one at a
time: the loop cannot start another while it runs one. Under load requests come back to back, far
sooner after a call than that call took, so they queue and batch as above; a call run this way
holds the loop, and the requests that arrive meanwhile wait for the model as they would in the
queue (`inline_calls` in `stats()` counts them).

Each collection that waits costs one timer; items are grouped by shape as they arrive, so taking
a batch costs O(its size). `stats()` counts what ran: calls per padded batch size, items, padding
rows, the waits, and the model thread's busy time (docs/serving.md, "Stats")."""

from __future__ import annotations

import asyncio
import bisect
import collections
import concurrent.futures
import logging
import time
from typing import Any, Callable, Hashable, Sequence

logger = logging.getLogger("aitune.dynamo")

# run_batch(key, items, padded_size) -> one output per item (the padding's outputs dropped).
RunBatch = Callable[[Hashable, list, int], list]


def padded_size(count: int, sizes: Sequence[int]) -> int:
    """The smallest of the sorted tuned `sizes` that holds `count` items."""
    return sizes[bisect.bisect_left(sizes, count)]


def batch_plan(count: int, sizes: Sequence[int]) -> list[tuple[int, int]]:
    """(items, padded size) per call for `count` items of one shape: full calls of the largest
    tuned size, then the rest in one call padded up to the smallest tuned size that holds it."""
    sizes = sorted(set(sizes))
    largest = sizes[-1]
    plan = [(largest, largest)] * (count // largest)
    rest = count % largest
    if rest:
        plan.append((rest, padded_size(rest, sizes)))
    return plan


class _Waiting:
    __slots__ = ("item", "future", "arrived", "request")

    def __init__(self, item: Any, future: asyncio.Future, arrived: float, request: int) -> None:
        self.item = item
        self.future = future
        self.arrived = arrived  # the loop's clock when the item was queued
        self.request = request  # the number of the request it came in


def _wake_up(wake: asyncio.Future) -> None:
    if not wake.done():
        wake.set_result(None)


class DynamicBatcher:
    """`sizes_for(key)` gives the tuned batch sizes for items of that shape key."""

    def __init__(self, run_batch: RunBatch, sizes_for: Callable[[Hashable], Sequence[int]], max_wait_s: float) -> None:
        self._run_batch = run_batch
        self._sizes_for = sizes_for
        self._max_wait_s = max_wait_s
        self._sizes: dict[Hashable, list[int]] = {}  # key -> its tuned sizes, sorted
        # Queued items by shape key, oldest first; the keys' order is the order groups are served
        # in (a group left with items after a batch moves to the end, so no shape starves).
        self._groups: dict[Hashable, collections.deque[_Waiting]] = {}
        self._queued = 0
        # Requests the last model call answered, less those that arrived since it ended: while
        # > 0, more are expected (the answered clients' next requests), so a small batch may wait.
        self._expected = 0
        self._requests = 0  # requests submitted so far: numbers them
        self._wake: asyncio.Future | None = None  # set while the collector sleeps
        self._holding = False  # the collector sleeps with items queued, waiting for more
        self._task: asyncio.Task | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="aitune-model")
        self.batches_run = 0
        self.items_run = 0
        self.padding_run = 0  # rows added to reach a tuned size (their outputs are dropped)
        self.calls_by_size: collections.Counter[int] = collections.Counter()  # padded size -> model calls
        self.waits = 0  # collections that waited for more items with the model free
        self.wait_s = 0.0  # the time they waited
        # The model thread's time in run_batch, failed calls included. A CUDA call ends with the
        # copy of its outputs to the host, which waits for the device: this is device time plus
        # the host work around it, so busy_s / wall time bounds how busy the model keeps the GPU.
        self.busy_s = 0.0
        self.inline_calls = 0  # calls run on the event loop's thread (a request that found all idle)
        self._running = False  # a model call is under way
        self._last_end = 0.0  # time.perf_counter() when the last call ended
        self._last_took: float | None = None  # how long it took (None: no call yet)

    def stats(self) -> dict[str, Any]:
        """What ran so far; the keys of `calls_by_size` are strings, as JSON writes them."""
        return {
            "batches": self.batches_run,
            "items": self.items_run,
            "padding_rows": self.padding_run,
            "calls_by_size": {str(size): n for size, n in sorted(self.calls_by_size.items())},
            "model_busy_s": round(self.busy_s, 6),
            "waits": self.waits,
            "wait_s": round(self.wait_s, 6),
            "inline_calls": self.inline_calls,
        }

    async def submit(self, keyed_items: list[tuple[Hashable, Any]]) -> list:
        """The outputs of a request's items, in order; raises the error of a batch that failed."""
        loop = asyncio.get_running_loop()
        if self._task is None:
            self._task = loop.create_task(self._collect())
        if self._idle_for_a_lone_request(keyed_items):
            return self._run_inline(keyed_items)
        now = loop.time()
        self._requests += 1
        request = self._requests
        futures = []
        full = False
        for key, item in keyed_items:
            future = loop.create_future()
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = collections.deque()
            group.append(_Waiting(item, future, now, request))
            futures.append(future)
            full = full or len(group) >= self._tuned_sizes(key)[-1]
        self._queued += len(futures)
        self._expected -= 1
        wake = self._wake
        if wake is not None and not wake.done() and (not self._holding or full or self._expected <= 0):
            wake.set_result(None)
        if len(futures) == 1:
            return [await futures[0]]
        return list(await asyncio.gather(*futures))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for group in self._groups.values():  # nothing will run them
            for waiting in group:
                waiting.future.cancel()
        self._groups.clear()
        self._queued = 0
        self._executor.shutdown(wait=True)

    def _idle_for_a_lone_request(self, keyed_items: list[tuple[Hashable, Any]]) -> bool:
        if self._queued or self._running or self._last_took is None or not keyed_items:
            return False
        key = keyed_items[0][0]
        if any(k != key for k, _ in keyed_items) or len(keyed_items) > self._tuned_sizes(key)[-1]:
            return False
        return time.perf_counter() - self._last_end >= self._last_took

    def _run_inline(self, keyed_items: list[tuple[Hashable, Any]]) -> list:
        key = keyed_items[0][0]
        count = len(keyed_items)
        padded = padded_size(count, self._tuned_sizes(key))
        self._requests += 1
        self.inline_calls += 1
        try:
            outputs = self._timed_run_batch(key, [item for _, item in keyed_items], padded)
        except Exception as e:
            logger.warning("A batch of %d item(s) failed: %s: %s", count, type(e).__name__, e)
            raise
        self._count_run(count, padded)
        self._expected = 1
        return list(outputs)

    def _tuned_sizes(self, key: Hashable) -> list[int]:
        sizes = self._sizes.get(key)
        if sizes is None:
            sizes = self._sizes[key] = sorted(set(self._sizes_for(key)))
        return sizes

    def _next_group(self) -> tuple[Hashable, collections.deque[_Waiting]]:
        """The first group, in serving order, that fills the largest tuned size, else the first."""
        for key, group in self._groups.items():
            if len(group) >= self._tuned_sizes(key)[-1]:
                return key, group
        return next(iter(self._groups.items()))

    async def _sleep(self, deadline: float | None) -> None:
        """Until submit wakes the collector (an item arrives; while holding: a group fills or
        the expected requests are in), or until `deadline` on the loop's clock."""
        loop = asyncio.get_running_loop()
        self._wake = wake = loop.create_future()
        self._holding = deadline is not None
        timer = loop.call_at(deadline, _wake_up, wake) if deadline is not None else None
        try:
            await wake
        finally:
            self._wake = None
            if timer is not None:
                timer.cancel()

    async def _collect(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queued:
                await self._sleep(None)
                continue
            key, group = self._next_group()
            sizes = self._tuned_sizes(key)
            batching = self._max_wait_s > 0
            if batching and len(group) < sizes[-1] and self._expected > 0:
                deadline = group[0].arrived + self._max_wait_s
                now = loop.time()
                if deadline > now:
                    self.waits += 1
                    await self._sleep(deadline)
                    self.wait_s += loop.time() - now
                    continue  # the groups may have changed: choose again
            batch = self._take(key, group, sizes[-1] if batching else 1)
            if batch:
                await self._run(key, batch, sizes)

    def _take(self, key: Hashable, group: collections.deque[_Waiting], limit: int) -> list[_Waiting]:
        batch = []
        taken = 0
        while group and len(batch) < limit:
            waiting = group.popleft()
            taken += 1
            if not waiting.future.done():  # done: its request was cancelled
                batch.append(waiting)
        self._queued -= taken
        del self._groups[key]
        if group:  # to the end of the serving order
            self._groups[key] = group
        return batch

    def _timed_run_batch(self, key: Hashable, items: list, padded: int) -> list:
        start = time.perf_counter()
        try:
            return self._run_batch(key, items, padded)
        finally:  # one call at a time writes these: the model thread's or an inline one
            end = time.perf_counter()
            self.busy_s += end - start
            self._last_took = end - start
            self._last_end = end

    def _count_run(self, count: int, padded: int) -> None:
        self.batches_run += 1
        self.items_run += count
        self.padding_run += padded - count
        self.calls_by_size[padded] += 1

    async def _run(self, key: Hashable, batch: list[_Waiting], sizes: list[int]) -> None:
        count = len(batch)
        padded = padded_size(count, sizes)
        self._running = True  # set and cleared here, on the loop's thread, where submit reads it
        try:
            try:
                outputs = await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._timed_run_batch, key, [w.item for w in batch], padded
                )
            finally:
                self._running = False
        except Exception as e:  # noqa: BLE001 - this batch's requests fail, the worker serves on
            logger.warning("A batch of %d item(s) failed: %s: %s", count, type(e).__name__, e)
            for w in batch:
                if not w.future.done():
                    w.future.set_exception(e)
        else:
            self._count_run(count, padded)
            for w, output in zip(batch, outputs):
                if not w.future.done():
                    w.future.set_result(output)
        # Their clients may send their next requests now (a request split over two calls counts
        # in both: the wait it may cause is bounded by max_wait_s all the same).
        self._expected = len({w.request for w in batch}) if count > 1 else 1
