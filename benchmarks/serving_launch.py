"""Starting and stopping `python -m aitune.dynamo serve` for the serving benchmarks
(dynamo_scale.py, serving_gpu.py), and reading a worker's counters.

Every launcher runs in a session of its own, so stopping it (SIGTERM, then SIGKILL of the whole
session after a minute) leaves no frontend or worker behind. Launchers that share one discovery
folder (DYN_FILE_KV) and namespace are served by the one frontend among them: several models,
each at its own component (a frontend routes a model to the instances of its endpoint, so two
models must not share one)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator

HERE = Path(__file__).resolve().parent
STOP_TIMEOUT_S = 60.0
STATS_LINE = re.compile(r"pid (\d+)\] \w+ Stats: (\{.*\})\n")  # a whole line: the log may be mid-write


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_env(**extra: str) -> dict[str, str]:
    """The launchers' environment: file discovery in a fresh folder, the TCP request plane, this
    folder importable (the model factories live here), and `extra` (e.g. DYN_LOG=warn: at Dynamo's
    default level the frontend and the worker log seven INFO lines per request). Built when called,
    so the workers inherit what tuning set in this process (TORCHINDUCTOR_CACHE_DIR: warm compiles)."""
    return dict(
        os.environ,
        DYN_DISCOVERY_BACKEND="file",
        DYN_REQUEST_PLANE="tcp",
        DYN_FILE_KV=tempfile.mkdtemp(prefix="aitune-serving-kv-"),
        PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        **extra,
    )


def serve_command(
    factory: str,
    checkpoint: Path,
    devices: list[str],
    model_name: str,
    http_port: int | None = None,
    component: str = "backend",
    max_wait_ms: float | None = None,
    fronts: int = 0,
) -> list[str]:
    """`python -m aitune.dynamo serve`, with Dynamo's frontend when `http_port` is given; `fronts` > 0:
    an engine process per device fed by that many workers."""
    command = [sys.executable, "-m", "aitune.dynamo", "serve", "--model", factory, "--checkpoint", str(checkpoint)]
    command += ["--devices", ",".join(devices), "--model-name", model_name, "--component", component]
    if max_wait_ms is not None:
        command += ["--max-wait-ms", str(max_wait_ms)]
    if fronts:
        command += ["--fronts", str(fronts)]
    if http_port is not None:
        command += ["--frontend", "--http-host", "127.0.0.1", "--http-port", str(http_port)]
    return command


@contextlib.contextmanager
def launched(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)


def listed_models(port: int) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
            return [m["id"] for m in json.loads(r.read())["data"]]
    except (OSError, ValueError):
        return []


def wait_ready(
    launchers: list[tuple[subprocess.Popen, Path, int]], port: int, names: list[str], timeout_s: float
) -> None:
    """Until every launcher's log shows its (process, log, workers) workers ready and the frontend
    lists every name; RuntimeError naming the log when a launcher exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        ready = all(log.read_text(errors="replace").count("Worker ready") >= n for _, log, n in launchers)
        if ready and set(names) <= set(listed_models(port)):
            return
        for process, log, _ in launchers:
            if process.poll() is not None:
                raise RuntimeError(f"a launcher exited with code {process.returncode}; see {log}")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the workers were not ready after {timeout_s:g} s; see {[str(p[1]) for p in launchers]}"
            )
        time.sleep(0.5)


def first_requests(port: int, path: str, body: bytes, count: int, timeout_s: float = 120.0) -> None:
    """`count` requests one after another, each answered 200, before a row measures: a worker's
    first requests pay one-time costs (the frontend's connection to it, the model's first calls),
    which on a loaded 2-core machine outlasted a whole short row. RuntimeError on another answer."""
    for _ in range(count):
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as r:
                r.read()
        except OSError as e:  # HTTPError (a non-2xx answer) is one
            raise RuntimeError(f"a first request to {path} failed: {e}") from e


def worker_pids(log: Path) -> list[int]:
    """The worker processes a launcher started (its `started worker i (device): pid N` lines; with
    --fronts, `worker i.k`)."""
    text = log.read_text(errors="replace")
    return [int(pid) for pid in re.findall(r"started worker \d+(?:\.\d+)? \([^)]*\): pid (\d+)", text)]


def engine_pids(log: Path) -> list[int]:
    """The engine processes a `serve --fronts` launcher started (`started engine i (device): pid N`)."""
    return [int(pid) for pid in re.findall(r"started engine \d+ \([^)]*\): pid (\d+)", log.read_text(errors="replace"))]


def worker_stats(log: Path, pids: list[int], timeout_s: float = 10.0) -> dict[int, dict]:
    """Each worker's counters now: SIGUSR1 makes it log one `Stats: {...}` line (docs/serving.md,
    "Stats"); returns the new line's JSON per pid."""
    offset = log.stat().st_size  # only what is logged from now on is read
    for pid in pids:
        os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout_s
    while True:
        with open(log, "rb") as f:
            f.seek(offset)
            found = {
                int(pid): json.loads(payload) for pid, payload in STATS_LINE.findall(f.read().decode(errors="replace"))
            }
        if set(pids) <= set(found):
            return {pid: found[pid] for pid in pids}
        if time.monotonic() > deadline:
            raise RuntimeError(f"workers {pids} logged no stats within {timeout_s:g} s of SIGUSR1; see {log}")
        time.sleep(0.05)


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) the process has used so far; None where /proc
    does not have it (not Linux, or the process has ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    # After the command's closing parenthesis: state is field 3, utime and stime fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stats_delta(first: dict, second: dict) -> dict:
    """What a worker ran between two of its Stats lines."""
    sizes = {
        size: n - first.get("calls_by_size", {}).get(size, 0)
        for size, n in second.get("calls_by_size", {}).items()
        if n - first.get("calls_by_size", {}).get(size, 0)
    }
    keys = ("served", "rejected", "failed", "batches", "items", "padding_rows", "inline_calls", "model_busy_s")
    delta = {k: round(second.get(k, 0) - first.get(k, 0), 6) for k in keys}
    delta.update(
        calls_by_size=dict(sorted(sizes.items(), key=lambda kv: int(kv[0]))), wall_s=second["at"] - first["at"]
    )
    return delta
