"""The engine link (aitune/dynamo/engine_link.py; docs/serving.md, "An engine process per device"),
without Dynamo: a real `python -m aitune.dynamo engine` process serving the tuned test embedder on
the CPU, and RemoteEngine, the fronts' side, in this process. Batches come back equal to the module
run here; bad messages get an error answer and the engine serves on; a client without the secret is
refused; SIGTERM stops it."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client
from pathlib import Path

import pytest
import torch

from aitune.dynamo.engine_link import (
    EngineLinkError,
    RemoteEngine,
    decode,
    encode,
    rules_from,
    rules_message,
)
from aitune.dynamo.module_engine import ModuleEngine
from aitune.dynamo.requests import BadRequest

from dynamo_models import TUNED_BATCH_SIZES, VOCABULARY, make_embedder, token_ids, tune_and_save
from dynamo_processes import environment

SECRET = "s" * 32


@pytest.fixture
def engine_process(tmp_path):
    checkpoint = tune_and_save(tmp_path / "e.ait")
    socket_path = tmp_path / "engine.sock"
    env = environment(tmp_path) | {"AITUNE_ENGINE_AUTHKEY": SECRET}
    log = tmp_path / "engine.log"
    command = [sys.executable, "-m", "aitune.dynamo", "engine", "--model", "dynamo_models:make_embedder"]
    command += ["--checkpoint", str(checkpoint), "--device", "cpu", "--socket", str(socket_path)]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield process, socket_path, log, checkpoint
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def local_rows(checkpoint: Path, ids: list[list[int]]) -> torch.Tensor:
    import aitune.torch as ait

    loaded = ait.load(make_embedder(), checkpoint, device_map={"embedder": "cpu"})
    engine = ModuleEngine(loaded)
    keyed = [engine.item(seq, i) for i, seq in enumerate(ids)]
    return torch.tensor(engine.run_batch(keyed[0][0], [item for _, item in keyed], padded=4))


def test_batches_run_in_the_engine_process_as_they_run_here(engine_process):
    process, socket_path, log, checkpoint = engine_process
    remote = RemoteEngine(str(socket_path), SECRET.encode(), connect_timeout_s=120)  # waits for the load
    try:
        # The rules came over the link: shapes, batch sizes, and the token-id range.
        assert [s.batch_sizes for s in remote.shapes] == [TUNED_BATCH_SIZES]
        assert remote.token_ids.limit == VOCABULARY
        with pytest.raises(BadRequest, match=r"'input\[0\]' has 5 token ids"):
            remote.item([1, 2, 3, 4, 5], 0)
        with pytest.raises(BadRequest, match=r"token id"):
            remote.item([VOCABULARY] * 8, 0)  # refused by the front, before the link
        ids = token_ids(3, seed=7)
        keyed = [remote.item(seq, i) for i, seq in enumerate(ids)]
        rows = remote.run_batch(keyed[0][0], [item for _, item in keyed], padded=4)
        assert len(rows) == 3 and all(type(v) is float for row in rows for v in row)
        torch.testing.assert_close(torch.tensor(rows), local_rows(checkpoint, ids), rtol=0, atol=0)
        # A batch the engine's own rules refuse (padded to an untuned size) fails that batch only.
        with pytest.raises(RuntimeError, match=r"the engine process failed the batch: EngineLinkError: .*tuned sizes"):
            remote.run_batch(keyed[0][0], [item for _, item in keyed], padded=3)
        one = remote.run_batch(keyed[0][0], [keyed[0][1]], padded=1)  # the engine serves on
        torch.testing.assert_close(torch.tensor(one), torch.tensor(rows[:1]), rtol=1e-5, atol=1e-6)
    finally:
        remote.close()
    # A client without the secret is refused, and the engine serves the next one.
    with pytest.raises(AuthenticationError):
        Client(str(socket_path), family="AF_UNIX", authkey=b"x" * 32)
    again = RemoteEngine(str(socket_path), SECRET.encode(), connect_timeout_s=30)
    again.close()
    process.send_signal(signal.SIGUSR1)  # as the benchmark asks a worker: the engine logs and serves on
    deadline = time.monotonic() + 30
    while 'Stats: {"batches": 2}' not in log.read_text(errors="replace") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    text = log.read_text(errors="replace")
    assert "Engine ready at" in text and "Engine stopped after 2 batches" in text, text[-2000:]
    assert "a connection was refused" in text
    assert not socket_path.exists(), "the socket file is removed at exit"


def test_the_engine_checks_every_message_itself(engine_process):
    """Messages a front would never send: each answered with an error, the link stays up."""
    _, socket_path, _, _ = engine_process
    deadline = time.monotonic() + 120
    while not socket_path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    link = Client(str(socket_path), family="AF_UNIX", authkey=SECRET.encode())
    try:
        rules, _ = decode(link.recv_bytes())
        ids = torch.tensor(token_ids(1)[0]).numpy().tobytes()  # int64, 8 values
        cases = {
            b"\x01": "shorter than its header length",
            b"\xff\xff\xff\x00{}": "does not fit",
            encode({"key": "x"}): "lengths must be a list",
            encode({"key": [0, [8]], "padded": 1, "lengths": [64]}, ids[:32]): "item lengths",
            encode({"key": [5, [8]], "padded": 1, "lengths": [64]}, ids): "no served graph 5",
            encode({"key": [0, [9]], "padded": 1, "lengths": [72]}, ids + ids[:8]): r"accepts items of shape \[9\]",
            # An id beyond the table reaches the engine only from a broken front: refused there too.
            encode({"key": [0, [8]], "padded": 1, "lengths": [64]}, torch.full((8,), VOCABULARY).numpy().tobytes()): (
                f"outside \\[0, {VOCABULARY}\\)"
            ),
        }
        for message, error in cases.items():
            link.send_bytes(message)
            answer, _ = decode(link.recv_bytes())
            assert "error" in answer and re.search(error, answer["error"]), (error, answer)
        link.send_bytes(encode({"key": [0, [8]], "padded": 1, "lengths": [64]}, ids))
        answer, data = decode(link.recv_bytes())
        assert answer == {"rows": 1, "dim": 16} and len(data) == 64
    finally:
        link.close()
    assert rules["token_ids"]["limit"] == VOCABULARY


def test_rules_survive_the_wire_and_hostile_rules_are_refused(tmp_path):
    import aitune.torch as ait

    loaded = ait.load(make_embedder(), tune_and_save(tmp_path / "e.ait"), device_map={"embedder": "cpu"})
    engine = ModuleEngine(loaded)
    header, _ = decode(encode(rules_message(engine)))
    rules = rules_from(header)
    assert [(s.graph, s.dtype, s.min_shape, s.max_shape, s.batch_sizes) for s in rules.shapes] == [
        (s.graph, s.dtype, s.min_shape, s.max_shape, s.batch_sizes) for s in engine.shapes
    ]
    assert (rules.token_ids.limit, rules.token_ids.dtypes) == (engine.token_ids.limit, engine.token_ids.dtypes)
    bad = rules_message(engine)
    bad["shapes"][0]["dtype"] = "os.system"
    with pytest.raises(EngineLinkError, match="unknown dtype 'os.system'"):
        rules_from(bad)
    with pytest.raises(EngineLinkError, match="non-empty 'shapes' list"):
        rules_from({"shapes": [], "token_ids": {}})
    with pytest.raises(EngineLinkError, match="batch_sizes must be a list of integers"):
        rules_from({**rules_message(engine), "shapes": [{**rules_message(engine)["shapes"][0], "batch_sizes": "4"}]})


def test_a_missing_secret_stops_the_engine_before_it_loads(tmp_path):
    env = environment(tmp_path)
    env.pop("AITUNE_ENGINE_AUTHKEY", None)
    command = [sys.executable, "-m", "aitune.dynamo", "engine", "--model", "dynamo_models:make_embedder"]
    command += ["--checkpoint", str(tmp_path / "absent.ait"), "--device", "cpu", "--socket", str(tmp_path / "s")]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "AITUNE_ENGINE_AUTHKEY must hold the engine link's shared secret" in result.stderr
