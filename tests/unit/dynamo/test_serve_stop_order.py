"""`serve` stops its children engines last (docs/serving.md, "Stopping"): a front's requests in
flight may finish after SIGTERM, and they need the engine process until then. Real child
processes, signalled by launch.stop itself."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from aitune.dynamo import launch

# A child that notes when SIGTERM reached it and when it ended, after `linger` seconds of draining.
CHILD = """
import signal, sys, time
from pathlib import Path
log, linger = Path(sys.argv[1]), float(sys.argv[2])
def on_term(*_):
    log.write_text(f"{time.monotonic()!r}")
    time.sleep(linger)
    log.write_text(log.read_text() + f" {time.monotonic()!r}")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
Path(sys.argv[1] + ".ready").touch()
while True:
    time.sleep(0.05)
"""


def _child(folder: Path, name: str, linger_s: float) -> tuple[subprocess.Popen, Path]:
    log = folder / name
    process = subprocess.Popen([sys.executable, "-c", CHILD, str(log), str(linger_s)])
    deadline = time.monotonic() + 30
    while not Path(f"{log}.ready").exists():
        assert process.poll() is None and time.monotonic() < deadline, "the child did not start"
        time.sleep(0.02)
    return process, log


def test_engines_get_sigterm_only_after_the_workers_have_ended(tmp_path):
    engine, engine_log = _child(tmp_path, "engine", 0.0)
    front_a, front_a_log = _child(tmp_path, "front-a", 0.5)
    front_b, front_b_log = _child(tmp_path, "front-b", 0.2)
    launch.stop(
        [
            (f"{launch.ENGINE_NAME} 0 (cpu)", engine),  # serve lists the engine before its workers
            ("worker 0.0 (cpu)", front_a),
            ("worker 0.1 (cpu)", front_b),
        ]
    )
    assert engine.returncode == front_a.returncode == front_b.returncode == 0
    engine_signalled = float(engine_log.read_text().split()[0])
    fronts_ended = max(float(log.read_text().split()[1]) for log in (front_a_log, front_b_log))
    assert engine_signalled >= fronts_ended
    for log in (front_a_log, front_b_log):  # the workers were signalled together, not one by one
        assert float(log.read_text().split()[0]) < engine_signalled


def test_serve_names_its_engines_so_that_they_stop_last(tmp_path, monkeypatch):
    """serve_main's engine children carry the name stop() looks for."""
    seen = []
    monkeypatch.setattr(launch, "supervise", lambda commands, env: seen.extend(commands) or 0)
    args = launch.parse(["serve", "--model", "m:f", "--checkpoint", "c.ait", "--devices", "cpu,cpu", "--fronts", "2"])
    assert launch.serve_main(args) == 0
    engines = [name for name, _ in seen if name.startswith(launch.ENGINE_NAME)]
    assert engines == ["engine 0 (cpu)", "engine 1 (cpu)"]
    assert all(command[3] == "engine" for name, command in seen if name in engines)
    assert sum(command[3] == "worker" for _, command in seen) == 4
