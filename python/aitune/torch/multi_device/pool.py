"""The device pool behind ait.tune(devices=[...]) (docs/guide.md, "Tuning on several GPUs"):
one worker process per device, started with the spawn method when ait.tune starts (so they
boot while the dataset is recorded) and stopped when it ends, whatever happens.

Per graph, the tuning process does what it always does first (max-batch search, eager
references, its eager baseline), then hands the candidates out: serving siblings go together
(they share one build), groups go to whichever worker is free, in list order. Each worker
measures its own eager baseline and evaluates its groups; its log lines appear here as they
happen, tagged with its device. A strategy whose decision is known early (FirstWins: a prefix
of records up to one that passed) gets no further groups started. The strategy then decides
from the records (`decide`), with the sequential rule. The pool is the strategy's executor
(tune_strategy/context.py: ait.tune installs it) and uses only the strategy's declared contract
(`RecordingStrategy`).

Torch's compile caches (Inductor's FX graph and autotuning caches, Triton's kernels) are
files: every worker and the tuning process use the same folders, so a JIT winner built again
on the tuning device compiles from what its worker cached."""

from __future__ import annotations

import collections
import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
from typing import TYPE_CHECKING, Iterator

import torch

from aitune.torch.backend.backend import Backend, sibling_key
from aitune.torch.config import config
from aitune.torch.multi_device import worker
from aitune.torch.multi_device.transport import graph_payload, module_payload, strategy_payload
from aitune.torch.tune_strategy.context import Baseline, GraphContext, RecordingStrategy
from aitune.torch.tune_strategy.outcome import CandidateTally
from aitune.torch.tune_strategy.records import CandidateRecord

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess
    from multiprocessing.sharedctypes import Synchronized
    from multiprocessing.synchronize import Lock

logger = logging.getLogger("aitune")


@contextlib.contextmanager
def device_pool(devices: list[torch.device]) -> Iterator[DevicePool]:
    """The pool's workers, started now and stopped when the block ends, whatever happens;
    `installed(pool)` (tune_strategy/context.py) makes it the executor of the graphs tuned meanwhile."""
    pool = DevicePool(devices)
    try:
        pool.start()
        yield pool
    finally:
        pool.close()


def _ended(exitcode: int | None) -> str:
    """How a worker process ended: a negative exit code is the signal that killed it."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name} (exit code {exitcode})"
        except ValueError:
            pass
    return f"exited with code {exitcode}"


def sibling_groups(candidates: list[Backend]) -> list[list[int]]:
    """Candidate indices grouped so serving siblings (one build, see siblings.py) stay together."""
    groups: list[list[int]] = []
    by_key: dict[str, list[int]] = {}
    for index, candidate in enumerate(candidates):
        key = sibling_key(candidate)
        if key is not None and key in by_key:
            by_key[key].append(index)
            continue
        groups.append([index])
        if key is not None:
            by_key[key] = groups[-1]
    return groups


def _share_compile_caches() -> None:
    """Workers inherit the environment: name the caches the tuning process uses, so all agree."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", cache_dir())
    except Exception as e:  # noqa: BLE001 - without it each process still caches on its own
        logger.debug("Inductor's cache folder is not known (%s); workers use their default", e)
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "triton"))


class _Worker:
    def __init__(self, index: int, device: torch.device) -> None:
        self.index = index
        self.device = device
        self.tag = f"worker {index} {device}"
        self.process: BaseProcess | None = None
        self.conn: Connection | None = None
        self.module_token: int | None = None
        self.ready = False

    def start(self, turn: tuple[Lock, Synchronized], cpu_threads: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=worker.main,
            args=(child, str(self.device), self.index, *turn, cpu_threads),
            name=f"aitune-tune-{self.index}",
            daemon=True,
        )
        self.process.start()
        child.close()
        self.module_token = None
        self.ready = False

    def wait_ready(self, timeout_s: float) -> None:
        """Until the process has imported torch and aitune (its "ready"), or it ended."""
        if self.ready or not self.alive():
            return
        if self.conn.poll(timeout_s):
            with contextlib.suppress(EOFError, OSError):
                self.ready = self.conn.recv()[0] == "ready"

    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(Exception):
            self.conn.send(("stop",))
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        with contextlib.suppress(Exception):
            self.conn.close()
        self.process = None


class DevicePool:
    def __init__(self, devices: list[torch.device]) -> None:
        self.devices = [torch.device(d) for d in devices]
        self._workers = [_Worker(i, d) for i, d in enumerate(self.devices)]
        self._module_tokens: dict[int, int] = {}
        self._module_bytes: dict[int, bytes] = {}

    def start(self) -> None:
        _share_compile_caches()
        context = multiprocessing.get_context("spawn")
        self._turn = (context.Lock(), context.Value("i", 0))  # measurements take turns (worker.TurnLock)
        cpu_workers = sum(d.type == "cpu" for d in self.devices)
        self._cpu_threads = max(1, (os.cpu_count() or 1) // max(1, cpu_workers))
        for w in self._workers:
            w.start(self._turn, self._cpu_threads)
        logger.info(
            "🖥️ Tuning on %d devices: %s (one worker process each)",
            len(self.devices),
            ", ".join(str(d) for d in self.devices),
        )

    def close(self) -> None:
        for w in self._workers:
            w.stop()
        self._module_bytes.clear()

    # -- one graph -----------------------------------------------------------------------------
    def evaluate(self, strategy: RecordingStrategy, ctx: GraphContext) -> list[CandidateRecord] | None:
        """The workers' records of every candidate, in candidate order, each scaled to the tuning
        device; None when the module or the strategy cannot be sent (a WARNING says why) or no
        worker process could run: the strategy then tunes the graph here."""
        try:
            module_bytes = self._module(ctx.module)
            payload = graph_payload(ctx)
            payload["strategy"] = strategy_payload(strategy)
        except TypeError as e:
            logger.warning("⚠️ %s; tuning graph `%s` on %s alone", e, ctx.graph.name, ctx.device)
            return None
        evaluated = self._evaluate(strategy, ctx, module_bytes, payload)
        if evaluated is None:
            return None
        records, baselines = evaluated
        self._scale_by_baselines(strategy.baseline(), records, baselines)
        return [records[i] for i in sorted(records)]

    def _module(self, module: torch.nn.Module) -> bytes:
        key = id(module)
        if key not in self._module_bytes:
            self._module_bytes = {key: module_payload(module)}  # one module at a time
            self._module_tokens[key] = len(self._module_tokens) + 1
        return self._module_bytes[key]

    def wait_ready(self, timeout_s: float = 300.0) -> None:
        """Until every worker has booted: ait.tune calls it before tuning, so the tuning
        process's own measurements (max-batch search, eager baseline) do not compete with
        workers importing torch."""
        for w in self._workers:
            w.wait_ready(timeout_s)

    def _prepare(self, w: _Worker, token: int, module_bytes: bytes, payload: dict[str, object]) -> None:
        if not w.alive():
            w.start(self._turn, self._cpu_threads)
        w.conn.send(("config", dict(config.__dict__)))
        if w.module_token != token:
            w.conn.send(("module", token, module_bytes))
            w.module_token = token
        w.conn.send(("graph", payload))

    def _evaluate(
        self, strategy: RecordingStrategy, ctx: GraphContext, module_bytes: bytes, payload: dict[str, object]
    ) -> tuple[dict[int, CandidateRecord], dict[int, dict]] | None:
        """Records by candidate index and eager baselines by worker; None when no worker process
        could run (then the caller tunes the graph here)."""
        candidates = strategy.candidates()
        pending = collections.deque(sibling_groups(candidates))
        token = self._module_tokens[id(ctx.module)]
        records: dict[int, CandidateRecord] = {}
        baselines: dict[int, dict] = {}
        busy: dict[int, list[int]] = {}
        for w in self._workers:
            self._prepare(w, token, module_bytes, payload)
        while True:
            if strategy.settled(records):
                pending.clear()  # the decision is known: start nothing more
            alive = [w for w in self._workers if w.alive()]
            for w in alive:
                if pending and w.index not in busy:
                    busy[w.index] = pending.popleft()
                    w.conn.send(("evaluate", busy[w.index]))
            # Every live worker's baseline is awaited too: its pipe is then drained for this graph.
            waiting = [w for w in alive if w.index in busy or w.index not in baselines]
            if not waiting:
                break
            listening = {w.conn: w for w in alive}
            for conn in multiprocessing.connection.wait(list(listening), timeout=1.0):
                self._receive(listening[conn], candidates, records, baselines, busy)
            for w in self._workers:
                if w.index in busy and not w.alive():
                    self._release_turn_of(w)
                    reason = f"the worker process on {w.device} {_ended(w.process.exitcode)}"
                    self._fail_group(w, busy.pop(w.index), candidates, records, reason)
                    baselines.setdefault(w.index, {})
                    if pending:
                        self._prepare(w, token, module_bytes, payload)  # a new process takes the next group
        if pending:
            codes = ", ".join(f"{w.tag}: exit code {w.process.exitcode if w.process else None}" for w in self._workers)
            logger.warning(
                "⚠️ No worker process is running (%s); graph `%s` is tuned in this process", codes, ctx.graph.name
            )
            return None
        return records, baselines

    def _receive(
        self,
        w: _Worker,
        candidates: list[Backend],
        records: dict[int, CandidateRecord],
        baselines: dict[int, dict],
        busy: dict[int, list[int]],
    ) -> None:
        try:
            message = w.conn.recv()
        except (EOFError, OSError):
            return  # the process ended; the liveness check reports it
        kind = message[0]
        if kind == "log":
            logger.log(message[1], "[%s] %s", w.tag, message[2])
        elif kind == "baseline":
            baselines[w.index] = message[1]
        elif kind == "records":
            for record in message[1]:
                records[record.index] = record
            busy.pop(w.index, None)
        elif kind == "error":
            logger.warning("⚠️ [%s] %s", w.tag, message[1].strip())
            baselines.setdefault(w.index, {})
            if w.index in busy:
                self._fail_group(w, busy.pop(w.index), candidates, records, message[1].splitlines()[0])

    def _release_turn_of(self, w: _Worker) -> None:
        """A worker that died while measuring never gave its turn back: give it back for it."""
        lock, owner = self._turn
        if w.process is not None and owner.value == w.process.pid:
            owner.value = 0
            lock.release()

    def _fail_group(
        self, w: _Worker, group: list[int], candidates: list[Backend], records: dict[int, CandidateRecord], reason: str
    ) -> None:
        logger.warning(
            "❌ [%s] %s while evaluating %s", w.tag, reason, ", ".join(candidates[i].describe() for i in group)
        )
        for index in group:
            description = candidates[index].describe()
            tally = CandidateTally()
            tally.record_failure(None)
            records[index] = CandidateRecord(
                index,
                str(w.device),
                description,
                tally=tally,
                worker=w.index,
                backend_results=[{"backend": description, "success": False, "error": reason, "device": str(w.device)}],
            )

    def _scale_by_baselines(
        self, baseline: Baseline | None, records: dict[int, CandidateRecord], baselines: dict[int, dict]
    ) -> None:
        """Each record's scale to the tuning device, and the spread between devices in the log:
        that is the noise within which a selection on several devices may differ from one on the
        tuning device alone."""
        if baseline is None or not baseline.throughput_per_s or not baselines:
            return
        here_tp = baseline.throughput_per_s
        here_lat = baseline.latency_ms if baseline.scales_records else None
        parts, ratios = [], [1.0]
        for w in self._workers:
            base = baselines.get(w.index) or {}
            if not base.get("throughput"):
                continue
            ratio = here_tp / base["throughput"]
            ratios.append(ratio)
            parts.append(f"{w.tag} {base['throughput']:.4g}/s (×{ratio:.3f})")
            for record in records.values():
                if record.worker == w.index and record.point is not None:
                    record.throughput_scale = ratio
                    if here_lat and base.get("latency_ms"):
                        record.latency_scale = here_lat / base["latency_ms"]
        spread = (max(ratios) / min(ratios) - 1) * 100 if ratios else 0.0
        how = (
            "each candidate's gate used its own device's baseline"
            if not baseline.scales_records
            else "each candidate's numbers are scaled by its device's ratio"
        )
        logger.info(
            "📊 Eager baseline on the tuning device %s: %.4g/s; %s. Devices differ by %.1f %%: "
            "selections within that noise may differ from a tune on one device; %s.",
            self.devices[0],
            here_tp,
            "; ".join(parts),
            spread,
            how,
        )
