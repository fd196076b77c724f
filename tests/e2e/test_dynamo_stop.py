"""A Dynamo worker stops within 5 s of SIGTERM or SIGINT whatever it serves — a tuned module
through the batcher (no mapping), a callable with or without a mapping, a torch module with a
mapping — idle or in the middle of a request that would run for a minute (docs/serving.md,
"Stopping"). The tuned module's blocking request comes alone to an idle worker, so it runs on the
event loop's own thread (batching.py): the stop must not wait for the loop. Real NVIDIA Dynamo runtime and frontend, on localhost; skips only without ai-dynamo."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from dynamo_processes import (
    environment,
    free_port,
    frontend_command,
    models,
    post,
    require_dynamo,
    running,
    session_members,
    wait_for,
)

STOP_WITHIN_S = 5.0
READY_TIMEOUT_S = 120.0
WORKER = str(Path(__file__).resolve().parents[1] / "helpers" / "dynamo_stop_worker.py")
BLOCKING_INPUT = {"tuned": [[49] * 8], "module": [[49] * 8], "callable": "block", "mapping": "block"}
PLAIN_INPUT = {"tuned": [[1] * 8], "module": [[1] * 8], "callable": "hello", "mapping": "hello"}


@pytest.fixture(scope="module")
def frontend(tmp_path_factory):
    require_dynamo()
    folder = tmp_path_factory.mktemp("dynamo-stop")
    env, port = environment(folder), free_port()
    with running(frontend_command(port), env, folder / "frontend.log"):
        yield env, port, folder


@pytest.mark.parametrize(
    ("kind", "busy", "signum"),
    [
        ("tuned", False, signal.SIGTERM),
        ("tuned", True, signal.SIGTERM),
        ("tuned", True, signal.SIGINT),
        ("callable", False, signal.SIGINT),
        ("callable", True, signal.SIGTERM),
        ("mapping", True, signal.SIGTERM),
        ("module", True, signal.SIGINT),
    ],
    ids=lambda v: v.name if isinstance(v, signal.Signals) else ("busy" if v is True else "idle" if v is False else v),
)
def test_worker_stops_within_5_s_of_the_signal(frontend, kind, busy, signum):
    env, port, folder = frontend
    name = f"stop-{kind}-{'busy' if busy else 'idle'}-{signum.name.lower()}"
    log, started = folder / f"{name}.log", folder / f"{name}.started"
    with running([sys.executable, WORKER, kind, name, str(started)], env, log) as worker:
        wait_for(lambda: name in models(port), READY_TIMEOUT_S, f"{name} on /v1/models", log)
        status, body = post(port, "/v1/embeddings", {"model": name, "input": PLAIN_INPUT[kind]})
        assert status == 200, body  # it serves before it is stopped
        if busy:
            request = threading.Thread(
                target=post, args=(port, "/v1/embeddings", {"model": name, "input": BLOCKING_INPUT[kind]}), daemon=True
            )
            request.start()
            wait_for(started.exists, 30.0, "the blocking request to reach the served function", log)
        signalled = time.monotonic()
        worker.send_signal(signum)
        try:
            worker.wait(timeout=STOP_WITHIN_S)
        except Exception as e:  # noqa: BLE001 - reported with the log
            pytest.fail(f"{name}: still running {STOP_WITHIN_S} s after {signum.name} ({e})\n{log.read_text()[-3000:]}")
        elapsed = time.monotonic() - signalled
    assert elapsed < STOP_WITHIN_S, elapsed
    assert worker.returncode == 0, log.read_text(errors="replace")[-3000:]
    assert session_members(worker.pid) == [], "a process of the worker outlived it"
    text = log.read_text(errors="replace")
    assert f"{signum.name}: stopping ({1 if busy else 0} request(s) in flight)" in text, text[-2000:]
