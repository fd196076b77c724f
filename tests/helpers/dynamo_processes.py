"""Helpers for the Dynamo end-to-end tests: a free localhost port, processes started in their
own session and always stopped (SIGTERM, then SIGKILL of the whole session), bounded waits, and
a plain HTTP client (urllib) for the OpenAI endpoints."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from aitune.dynamo import launch

REPO = Path(__file__).resolve().parents[2]
STOP_TIMEOUT_S = 30.0


def require_dynamo() -> None:
    """Skips with the reason when the registry could not provide ai-dynamo here."""
    for name in ("dynamo.frontend", "dynamo.llm", "dynamo.runtime"):
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:
            found = False
        if not found:
            pytest.skip(
                f"NVIDIA Dynamo is not installed ({name} not importable): ./run test installs ai-dynamo "
                "best effort; this machine could not get it from the registry"
            )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(tmp_path: Path) -> dict[str, str]:
    """File-based discovery in a folder of the test's own, the TCP request plane, and the
    aitune this test imports (the installed one under ./run test) and the test helpers
    importable."""
    import aitune

    env = dict(os.environ)
    python_path = [
        str(Path(aitune.__file__).resolve().parents[1]),
        str(REPO / "tests" / "helpers"),
        str(REPO / "tests" / "fakes"),
    ]
    env["PYTHONPATH"] = os.pathsep.join(python_path + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(
        DYN_DISCOVERY_BACKEND="file",
        DYN_REQUEST_PLANE="tcp",
        DYN_FILE_KV=str(tmp_path / "discovery"),
        AITUNE_CACHE_DIR=str(tmp_path / "aitune-cache"),
    )
    env.pop("DYN_SYSTEM_PORT", None)
    return env


def frontend_command(port: int, namespace: str = "aitune") -> list[str]:
    """The frontend as `aitune-dynamo --with-frontend` starts it, on localhost."""
    return launch.frontend_command("127.0.0.1", port, namespace)


@contextlib.contextmanager
def running(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    """The command in a session of its own (so its children can be found and stopped), its
    output in `log`; on exit SIGTERM, then SIGKILL for anything left in the session."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield process
    finally:
        stop_session(process)


def stop_session(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # the session's leftovers, if any
    process.wait(timeout=STOP_TIMEOUT_S)


def session_members(session_id: int) -> list[int]:
    """Live processes in the session (zombies excluded), from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, session = fields[0], int(fields[3])
        if session == session_id and state != "Z":
            members.append(int(entry.name))
    return members


def wait_for(condition: Any, timeout_s: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}\n--- log tail ---\n{tail}")


def post(port: int, path: str, body: Any, timeout_s: float = 30.0) -> tuple[int, dict]:
    """(status, JSON body) of a POST; HTTP errors are returned, not raised."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def models(port: int) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as response:
            return [m["id"] for m in json.loads(response.read())["data"]]
    except (OSError, ValueError):
        return []
