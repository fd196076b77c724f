"""A worker process of the device pool (pool.py): one device, candidates evaluated through the
strategy's declared contract (tune_strategy/context.py `RecordingStrategy`): `start_graph` measures
the eager baseline on this device, `evaluate` builds, checks and measures a group of candidates
(FirstWins' gate, a profiling strategy's sweep) and returns a record per candidate, which goes back.
Its `aitune` log lines go to the tuning process as they happen.

Messages in: ("config", state), ("module", token, bytes), ("graph", payload), ("evaluate",
[indices]), ("stop",). Out: ("ready",), ("log", level, text), ("baseline", dict),
("records", [CandidateRecord]), ("error", text)."""

from __future__ import annotations

import logging
import os
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.sharedctypes import Synchronized
    from multiprocessing.synchronize import Lock

    import torch

    from aitune.torch.tune_strategy.context import RecordingStrategy
    from aitune.torch.tune_strategy.records import CandidateRecord

logger = logging.getLogger("aitune")


class _Forward(logging.Handler):
    def __init__(self, conn: Connection) -> None:
        super().__init__(logging.INFO)
        self.conn = conn

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.conn.send(("log", record.levelno, record.getMessage()))
        except Exception:  # noqa: BLE001 - the tuning process is gone; nothing to tell
            pass


class TurnLock:
    """The pool's measurement turn: a process lock and the pid holding it, so the pool can
    release the turn of a worker that died measuring (pool.py)."""

    def __init__(self, lock: Lock, owner: Synchronized, timeout_s: float = 600.0) -> None:
        self.lock, self.owner, self.timeout_s = lock, owner, timeout_s
        self.held = False

    def __enter__(self) -> TurnLock:
        self.held = self.lock.acquire(timeout=self.timeout_s)
        if self.held:
            self.owner.value = os.getpid()
        else:
            logger.warning("⚠️ Measuring without a turn: another worker held it for %g s", self.timeout_s)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.held:
            self.owner.value = 0
            self.lock.release()
            self.held = False


class _GraphJob:
    """One graph's evaluation state in this worker."""

    def __init__(
        self,
        module: torch.nn.Module,
        strategy: RecordingStrategy,
        payload: dict[str, object],
        device: torch.device | str,
        index: int,
    ) -> None:
        import torch

        from aitune.torch.multi_device.transport import load_graph
        from aitune.torch.tune_data import model as tune_data_model
        from aitune.torch.tune_data import recorder as tune_data
        from aitune.torch.tune_strategy.context import GraphContext

        graph, samples, refs = load_graph(payload, device)
        # The worker's builds go to a folder of its own: the eager baseline's folder and the
        # candidates' build folders are per device (docs/guide.md, "Tuning on several GPUs").
        cache_dir = Path(payload["cache_dir"]) / f"worker-{index}-{str(device).replace(':', '')}"
        self.ctx = GraphContext(
            module,
            payload["module_name"],
            graph,
            samples,
            torch.device(device),
            cache_dir,
            refs=refs,
            batch_sizes=payload["batch_sizes"],
            budget=payload.get("budget"),
        )
        self.strategy = strategy
        self.index = index
        # Telemetry of this worker's builds, collected in memory and sent with each record.
        self.report = tune_data_model.GraphReport(name=graph.name)
        tune_data._state.graph = self.report
        module.to(self.ctx.device)
        strategy.start_graph(self.ctx)  # the eager baseline on this device

    def baseline(self) -> dict[str, float | None]:
        measured = self.strategy.baseline()
        if measured is None:
            return {}
        return {"throughput": measured.throughput_per_s, "latency_ms": measured.latency_ms}

    def evaluate(self, indices: list[int]) -> list[CandidateRecord]:
        records = self.strategy.evaluate(indices, self.ctx)
        for record in records:
            record.worker = self.index
        return records

    def close(self) -> None:
        self.strategy.end_graph()


def main(
    conn: Connection, device: str, index: int, measurement_lock: Lock, lock_owner: Synchronized, cpu_threads: int
) -> None:
    """The worker process's loop (started by pool.py with the spawn method). Its measurements
    take the pool's `measurement_lock` (with `lock_owner`, the pid holding it): they take turns, so no two measure at once; on the CPU
    it uses `cpu_threads` threads, its share of the cores."""
    os.environ["AITUNE_PROGRESS"] = "0"  # no live status line from a background process
    import torch

    from aitune.torch.config import config
    from aitune.torch.multi_device.transport import load_strategy, loads_tensors
    from aitune.torch.task import sweep

    sweep.MEASUREMENT_LOCK[0] = TurnLock(measurement_lock, lock_owner)
    if torch.device(device).type == "cpu":
        torch.set_num_threads(cpu_threads)

    logger.handlers[:] = [_Forward(conn)]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    if torch.device(device).type == "cuda":
        torch.cuda.set_device(torch.device(device))
    module_token, module, job = None, None, None
    conn.send(("ready",))
    while True:
        message = conn.recv()
        kind = message[0]
        if kind == "stop":
            break
        try:
            if kind == "config":
                config.__dict__.update(message[1])
            elif kind == "module":
                if job is not None:
                    job.close()
                    job = None
                module_token, module = message[1], loads_tensors(message[2], device).eval()
            elif kind == "graph":
                if job is not None:
                    job.close()
                    job = None  # a graph that fails to set up must not leave the last one in place
                job = _GraphJob(module, load_strategy(message[1]["strategy"]), message[1], device, index)
                conn.send(("baseline", job.baseline()))
            elif kind == "evaluate":
                if job is None:
                    raise RuntimeError("the graph could not be set up in this worker (see its error above)")
                conn.send(("records", job.evaluate(message[1])))
        except Exception as e:  # noqa: BLE001 - reported; the tuning process counts those candidates as failed
            conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    if job is not None:
        job.close()
    del module_token
