"""The batcher's policy (docs/serving.md, "Batching"), with a fake model whose calls record their
batch sizes and can be held on an event: collecting overlaps the model call, the model takes what
is queued as soon as it is free, it waits only when more requests are expected (never at a steady
single client) and never past max_wait after an item arrived, max_wait 0 runs one item per call,
groups by shape and pads to the tuned sizes, calls reach the model one at a time, and a lone
request that finds everything idle runs on the event loop's thread while a burst still batches."""

from __future__ import annotations

import asyncio
import threading
import time

from aitune.dynamo.batching import DynamicBatcher


class FakeModel:
    """run_batch records (key, items, padded size) and, while `hold` is set, blocks every call
    until `release()`; it notes calls that overlap and the threads they ran in."""

    def __init__(self, hold: bool = False, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.calls: list[tuple[object, int, int]] = []
        self.threads: set[str] = set()
        self.started = threading.Event()
        self._released = threading.Event()
        if not hold:
            self._released.set()
        self._active = 0
        self.overlapped = False

    def release(self) -> None:
        self._released.set()

    def run_batch(self, key, items, padded):
        self._active += 1
        self.overlapped = self.overlapped or self._active > 1
        try:
            self.threads.add(threading.current_thread().name)
            self.calls.append((key, len(items), padded))
            self.started.set()
            assert self._released.wait(10), "the test never released the model"
            time.sleep(self.delay_s)
            return [f"{key}:{item}" for item in items]
        finally:
            self._active -= 1

    @property
    def sizes(self) -> list[int]:
        return [n for _, n, _ in self.calls]


async def _until_running(model: FakeModel) -> None:
    while not model.started.is_set():
        await asyncio.sleep(0.001)


def test_a_steady_single_client_never_waits():
    """max_wait 200 ms: each request of a client that sends the next one after the answer runs
    at once, whatever its number of items."""
    model = FakeModel()

    async def scenario():
        batcher = DynamicBatcher(model.run_batch, lambda key: [1, 2, 4, 8], max_wait_s=0.2)
        took, answers = [], []
        for items in ([0], [1], [2, 3], [4], [5, 6, 7], [8]):
            start = time.perf_counter()
            answers.append(await batcher.submit([("a", i) for i in items]))
            took.append(time.perf_counter() - start)
        await batcher.close()
        return took, answers, batcher

    took, answers, batcher = asyncio.run(scenario())
    assert answers[2] == ["a:2", "a:3"] and answers[-1] == ["a:8"]
    assert max(took) < 0.05, f"a lone request waited for a batch: {took}"
    assert model.sizes == [1, 1, 2, 1, 3, 1] and batcher.waits == 0


def test_items_that_arrive_while_a_batch_runs_are_the_next_call():
    """Five requests arrive while the first one's call runs: nothing else reaches the model
    meanwhile; when it is free it takes them, with the first client's next request (expected:
    the call answered it), in one call padded to 8, long before max_wait."""
    model = FakeModel(hold=True)

    async def scenario():
        batcher = DynamicBatcher(model.run_batch, lambda key: [1, 2, 4, 8], max_wait_s=0.5)
        first = asyncio.ensure_future(batcher.submit([("a", 0)]))
        await _until_running(model)
        others = [asyncio.ensure_future(batcher.submit([("a", i)])) for i in range(1, 6)]
        await asyncio.sleep(0.05)
        calls_while_busy = list(model.calls)
        model.release()
        assert await first == ["a:0"]
        answers = await asyncio.gather(batcher.submit([("a", 6)]), *others)
        await batcher.close()
        return calls_while_busy, answers, batcher

    calls_while_busy, answers, batcher = asyncio.run(scenario())
    assert calls_while_busy == [("a", 1, 1)], "one call at a time: the others queue while it runs"
    assert answers == [["a:6"], ["a:1"], ["a:2"], ["a:3"], ["a:4"], ["a:5"]]
    assert model.calls == [("a", 1, 1), ("a", 6, 8)]
    assert batcher.waits == 1 and batcher.wait_s < 0.25, "it waited for the returning client, not for max_wait"
    assert not model.overlapped and model.threads == {"aitune-model_0"}


def test_a_wait_ends_at_max_wait_after_the_oldest_item_when_nobody_comes():
    model = FakeModel(hold=True)

    async def scenario():
        loop = asyncio.get_running_loop()
        batcher = DynamicBatcher(model.run_batch, lambda key: [1, 2, 4, 8], max_wait_s=0.3)
        first = asyncio.ensure_future(batcher.submit([("a", 0)]))
        await _until_running(model)
        queued_at = loop.time()
        others = [asyncio.ensure_future(batcher.submit([("a", i)])) for i in range(1, 4)]
        await asyncio.sleep(0.02)  # queued while the call runs
        model.release()
        await first  # and its client sends nothing more
        await asyncio.gather(*others)
        elapsed = loop.time() - queued_at
        await batcher.close()
        return elapsed, batcher

    elapsed, batcher = asyncio.run(scenario())
    assert model.calls == [("a", 1, 1), ("a", 3, 4)]
    assert batcher.waits == 1 and 0.25 <= elapsed < 1.0, elapsed


def test_no_wait_when_the_largest_size_is_queued_or_the_items_already_waited_max_wait():
    """A free model runs a full largest-size batch at once (max_wait 5 s notwithstanding); items
    that waited max_wait behind a long call run as soon as it ends."""
    model = FakeModel(hold=True)

    async def full_group():
        batcher = DynamicBatcher(model.run_batch, lambda key: [1, 2, 4], max_wait_s=5.0)
        first = asyncio.ensure_future(batcher.submit([("a", 0)]))
        await _until_running(model)
        others = [asyncio.ensure_future(batcher.submit([("a", i)])) for i in range(1, 5)]
        await asyncio.sleep(0.01)
        start = time.perf_counter()
        model.release()
        await asyncio.gather(first, *others)
        elapsed = time.perf_counter() - start
        await batcher.close()
        return elapsed, batcher

    elapsed, batcher = asyncio.run(full_group())
    assert model.calls == [("a", 1, 1), ("a", 4, 4)] and batcher.waits == 0 and elapsed < 1.0

    model = FakeModel(hold=True)

    async def long_call():
        batcher = DynamicBatcher(model.run_batch, lambda key: [1, 2, 4, 8], max_wait_s=0.1)
        first = asyncio.ensure_future(batcher.submit([("a", 0)]))
        await _until_running(model)
        others = [asyncio.ensure_future(batcher.submit([("a", i)])) for i in range(1, 11)]
        await asyncio.sleep(0.15)  # the call outlasts max_wait
        model.release()
        await asyncio.gather(first, *others)
        await batcher.close()
        return batcher

    batcher = asyncio.run(long_call())
    assert model.calls == [("a", 1, 1), ("a", 8, 8), ("a", 2, 2)] and batcher.waits == 0


def test_max_wait_zero_runs_every_item_as_its_own_call():
    model = FakeModel(hold=True)

    async def scenario():
        batcher = DynamicBatcher(model.run_batch, lambda key: [2, 4], max_wait_s=0)
        first = asyncio.ensure_future(batcher.submit([("a", 0)]))
        await _until_running(model)
        rest = [batcher.submit([("a", 1), ("a", 2), ("a", 3)]), batcher.submit([("b", 4)]), batcher.submit([("a", 5)])]
        pending = [asyncio.ensure_future(r) for r in rest]
        await asyncio.sleep(0.01)
        model.release()
        answers = await asyncio.gather(first, *pending)
        await batcher.close()
        return answers, batcher

    answers, batcher = asyncio.run(scenario())
    assert answers == [["a:0"], ["a:1", "a:2", "a:3"], ["b:4"], ["a:5"]]
    assert [(n, padded) for _, n, padded in model.calls] == [(1, 2)] * 6, "one item per call, padded to 2"
    assert batcher.stats()["calls_by_size"] == {"2": 6} and batcher.padding_run == 6 and batcher.waits == 0


def test_queued_items_are_grouped_by_shape_padded_and_served_in_turn():
    """Queued while the model is busy: a 3-item group of shape a runs as one call padded to 4
    and the 2-item group of b as one of 2, each output back to its own request; a group larger
    than the largest size yields to the next shape before its rest runs."""
    model = FakeModel(hold=True)

    async def scenario(sizes, queued):
        batcher = DynamicBatcher(model.run_batch, lambda key: sizes, max_wait_s=0.01)
        first = asyncio.ensure_future(batcher.submit([("c", 0)]))
        await _until_running(model)
        pending = [asyncio.ensure_future(batcher.submit(request)) for request in queued]
        await asyncio.sleep(0.05)  # longer than max_wait: no wait after the first call
        model.release()
        answers = await asyncio.gather(first, *pending)
        await batcher.close()
        return answers[1:], batcher

    queued = [[("a", 1)], [("b", 2), ("b", 3)], [("a", 4), ("a", 5)]]
    answers, batcher = asyncio.run(scenario([1, 2, 4, 8], queued))
    assert answers == [["a:1"], ["b:2", "b:3"], ["a:4", "a:5"]]
    assert model.calls == [("c", 1, 1), ("a", 3, 4), ("b", 2, 2)]
    assert batcher.padding_run == 1 and batcher.stats()["calls_by_size"] == {"1": 1, "2": 1, "4": 1}

    model = FakeModel(hold=True)
    queued = [[("a", i)] for i in range(6)] + [[("b", 9)]]
    answers, _ = asyncio.run(scenario([1, 2, 4], queued))
    assert answers == [[f"a:{i}"] for i in range(6)] + [["b:9"]]
    assert model.calls == [("c", 1, 1), ("a", 4, 4), ("b", 1, 1), ("a", 2, 2)]


def test_a_cancelled_request_is_not_run():
    model = FakeModel(hold=True)

    async def scenario():
        batcher = DynamicBatcher(model.run_batch, lambda key: [1, 2, 4], max_wait_s=0.01)
        first = asyncio.ensure_future(batcher.submit([("a", 0)]))
        await _until_running(model)
        gone = asyncio.ensure_future(batcher.submit([("a", 1)]))
        kept = asyncio.ensure_future(batcher.submit([("a", 2)]))
        await asyncio.sleep(0.05)
        gone.cancel()
        model.release()
        answers = await asyncio.gather(first, kept)
        await batcher.close()
        return answers

    assert asyncio.run(scenario()) == [["a:0"], ["a:2"]]
    assert model.calls == [("a", 1, 1), ("a", 1, 1)]


def test_a_lone_request_on_an_idle_batcher_runs_on_the_loop_and_a_burst_after_it_batches():
    """After one call of 20 ms and a longer pause, a lone request runs at once on the event loop's
    thread (no hop to the model thread); six requests that arrive right after it (sooner than its
    20 ms) queue and run as one call in the model thread, as without the shortcut."""
    model = FakeModel(delay_s=0.02)

    async def scenario():
        batcher = DynamicBatcher(model.run_batch, lambda key: [1, 2, 4, 8], max_wait_s=0.2)
        first = await batcher.submit([("a", 0)])  # no call yet: through the model thread
        await asyncio.sleep(0.05)
        lone = await batcher.submit([("a", 1)])
        burst = await asyncio.gather(*(batcher.submit([("a", i)]) for i in range(2, 8)))
        await batcher.close()
        return first, lone, burst, batcher

    first, lone, burst, batcher = asyncio.run(scenario())
    assert first == ["a:0"] and lone == ["a:1"] and burst == [[f"a:{i}"] for i in range(2, 8)]
    assert model.calls == [("a", 1, 1), ("a", 1, 1), ("a", 6, 8)]
    assert model.threads == {"aitune-model_0", threading.main_thread().name}
    assert batcher.stats()["inline_calls"] == 1 and batcher.items_run == 8 and not model.overlapped


def test_a_failed_inline_call_fails_its_request_only():
    """The lone request's error reaches its caller; the next request is served."""
    failing = {"a:1"}

    def run_batch(key, items, padded):
        time.sleep(0.005)
        answers = [f"{key}:{item}" for item in items]
        if failing & set(answers):
            raise RuntimeError("device error")
        return answers

    async def scenario():
        batcher = DynamicBatcher(run_batch, lambda key: [1, 2], max_wait_s=0.01)
        await batcher.submit([("a", 0)])
        await asyncio.sleep(0.02)
        try:
            await batcher.submit([("a", 1)])
        except RuntimeError as e:
            error = str(e)
        await asyncio.sleep(0.02)
        after = await batcher.submit([("a", 2), ("a", 3)])
        await batcher.close()
        return error, after, batcher

    error, after, batcher = asyncio.run(scenario())
    assert error == "device error" and after == ["a:2", "a:3"]
    assert batcher.stats()["inline_calls"] == 2 and batcher.batches_run == 2
