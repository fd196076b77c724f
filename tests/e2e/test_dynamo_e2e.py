"""End to end with the real NVIDIA Dynamo (docs/serving.md): Dynamo's OpenAI frontend and
aitune workers serving a tuned module on the CPU, as subprocesses on localhost, with file-based
discovery and the TCP request plane; requests from a plain HTTP client. Skips, with the reason,
only when ai-dynamo is not installed."""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import torch

from dynamo_models import SEQUENCE, VOCABULARY, make_embedder, token_ids, tune_and_save
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

READY_TIMEOUT_S = 120.0  # a worker imports torch and aitune, loads the checkpoint, registers


@pytest.fixture
def checkpoint(tmp_path):
    require_dynamo()
    return tune_and_save(tmp_path / "embedder.ait")


def eager(ids: list[list[int]]) -> torch.Tensor:
    with torch.no_grad():
        return make_embedder()(torch.tensor(ids))


def worker_command(checkpoint, device: str = "cpu") -> list[str]:
    return [
        sys.executable,
        "-m",
        "aitune.dynamo",
        "worker",
        "--model",
        "dynamo_models:make_embedder",
        "--checkpoint",
        str(checkpoint),
        "--device",
        device,
        "--model-name",
        "embedder",
    ]


# The tuned-module path on the CPU, and on CUDA where there is one (marked gpu).
ON_CPU_AND_CUDA = pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda:0",
            marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
        ),
    ],
)


@contextlib.contextmanager
def serving_embedder(
    tmp_path: Path, checkpoint: Path, device: str
) -> Iterator[tuple[int, subprocess.Popen, subprocess.Popen]]:
    """A frontend and a worker of the tuned embedder on `device`, once the model is listed: (port, frontend, worker)."""
    env, port = environment(tmp_path), free_port()
    with (
        running(frontend_command(port), env, tmp_path / "frontend.log") as frontend,
        running(worker_command(checkpoint, device), env, tmp_path / "worker.log") as worker,
    ):
        wait_for(
            lambda: "embedder" in models(port), READY_TIMEOUT_S, "the model on /v1/models", tmp_path / "worker.log"
        )
        yield port, frontend, worker


def assert_serves_eager(body: dict, ids: list[list[int]]) -> None:
    """The embeddings of a 200 answer, in request order, equal eager's for `ids`."""
    served = torch.tensor([item["embedding"] for item in sorted(body["data"], key=lambda d: d["index"])])
    torch.testing.assert_close(served, eager(ids), rtol=1e-3, atol=1e-4)


def test_frontend_and_worker_serve_embeddings_and_reject_bad_requests(tmp_path, checkpoint):
    with serving_embedder(tmp_path, checkpoint, "cpu") as (port, frontend, worker):
        ids = token_ids(3, seed=7)
        status, body = post(port, "/v1/embeddings", {"model": "embedder", "input": ids})
        assert status == 200, body
        served = torch.tensor([item["embedding"] for item in sorted(body["data"], key=lambda d: d["index"])])
        torch.testing.assert_close(served, eager(ids), rtol=1e-5, atol=1e-6)
        assert body["usage"]["prompt_tokens"] == 3 * SEQUENCE

        # One item, base64 and truncated to 4 dimensions, as OpenAI's parameters ask.
        status, body = post(
            port, "/v1/embeddings", {"model": "embedder", "input": ids[0], "encoding_format": "base64", "dimensions": 4}
        )
        assert status == 200, body
        decoded = struct.unpack("<4f", base64.b64decode(body["data"][0]["embedding"]))
        torch.testing.assert_close(torch.tensor(decoded), eager(ids[:1])[0, :4], rtol=1e-5, atol=1e-6)

        # Malformed requests: clear 400s naming what was wrong, and the worker keeps serving.
        status, body = post(port, "/v1/embeddings", {"model": "embedder", "input": [1, 2, 3]})
        assert status == 400
        assert "has 3 token ids" in body["message"] and "[8]" in body["message"], body
        status, body = post(port, "/v1/embeddings", {"model": "embedder", "input": "some text"})
        assert status == 400 and "must be token ids" in body["message"], body
        status, body = post(port, "/v1/embeddings", b"{not json")
        assert status == 400, body
        status, body = post(port, "/v1/embeddings", {"model": "embedder", "input": ids[:1]})
        assert status == 200 and len(body["data"]) == 1

        assert worker.poll() is None and frontend.poll() is None, "a bad request must not end a process"
    for process in (frontend, worker):
        assert session_members(process.pid) == [], "processes left running after stop"
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert re.search(r"served 3 requests \(2 rejected as bad requests, 0 failed\)", log), log[-2000:]


@ON_CPU_AND_CUDA
def test_bad_requests_get_400_and_the_worker_serves_on(tmp_path, checkpoint, device):
    """The four bad requests of issue 26 on the tuned-module path (the batcher), on the CPU and on
    CUDA: wrong item shape, wrong dtype (floats for token ids), more items than the largest tuned
    batch size, malformed JSON. Each gets a 400 naming the problem; the next request is served."""
    with serving_embedder(tmp_path, checkpoint, device) as (port, frontend, worker):
        bad = {
            "wrong shape": ({"model": "embedder", "input": [[1, 2, 3]]}, "has 3 token ids"),
            "wrong dtype": ({"model": "embedder", "input": [[0.5] * SEQUENCE]}, None),
            "oversized batch": ({"model": "embedder", "input": token_ids(5)}, "a request may carry at most 4"),
            "malformed JSON": (b'{"model": "embedder", "input": [[1, 2', None),
        }
        for what, (body, message) in bad.items():
            status, answer = post(port, "/v1/embeddings", body)
            assert status == 400, (what, status, answer)
            assert message is None or message in answer["message"], (what, answer)
            assert worker.poll() is None and frontend.poll() is None, f"{what} ended a process"
        ids = token_ids(4, seed=3)
        status, body = post(port, "/v1/embeddings", {"model": "embedder", "input": ids})
        assert status == 200, body
        assert_serves_eager(body, ids)
    log = (tmp_path / "worker.log").read_text(errors="replace")
    rejected = int(re.search(r"served 1 requests \((\d+) rejected as bad requests, 0 failed\)", log)[1])
    # Dynamo's frontend refuses the floats and the malformed JSON itself (its request types); the
    # worker rejects the wrong shape and the oversized batch, and would the floats if they came.
    assert rejected >= 2, log[-2000:]


def raw_item(ids: list[int]) -> str:
    """An item as raw int64 little-endian bytes in a data URL (docs/serving.md, "Requests")."""
    return "data:application/octet-stream;base64," + base64.b64encode(struct.pack(f"<{len(ids)}q", *ids)).decode()


@ON_CPU_AND_CUDA
def test_items_as_raw_bytes_are_served_like_token_ids(tmp_path, checkpoint, device):
    """The binary form of an item through the real frontend: one data URL, or a list of them,
    serves what the same ids as JSON ints serve; bad base64, a byte count that is no whole item
    and an out-of-vocabulary id inside the bytes are 400s naming the problem."""
    with serving_embedder(tmp_path, checkpoint, device) as (port, frontend, worker):
        ids = token_ids(2, seed=21)
        status, body = post(port, "/v1/embeddings", {"model": "embedder", "input": raw_item(ids[0])})
        assert status == 200, body
        assert_serves_eager(body, ids[:1])
        status, body = post(port, "/v1/embeddings", {"model": "embedder", "input": [raw_item(i) for i in ids]})
        assert status == 200, body
        assert_serves_eager(body, ids)
        assert body["usage"]["prompt_tokens"] == 2 * SEQUENCE, "values per item, not bytes"
        bad = {
            "not base64": ("data:application/octet-stream;base64,@@@@", "is not valid base64"),
            "half an item": (raw_item(ids[0])[:-12], "bytes; the tuned model accepts item shapes"),
            "beyond the vocabulary": (raw_item(ids[0][:-1] + [VOCABULARY]), f"token id {VOCABULARY} is outside"),
            "plain text": ("some text", "must be token ids"),
        }
        for what, (item, message) in bad.items():
            status, answer = post(port, "/v1/embeddings", {"model": "embedder", "input": item})
            assert status == 400 and message in answer["message"], (what, status, answer)
        assert worker.poll() is None and frontend.poll() is None, "a bad raw item ended a process"


@ON_CPU_AND_CUDA
def test_token_ids_outside_the_vocabulary_get_400_and_their_batch_mates_are_served(tmp_path, checkpoint, device):
    """Token ids -1 and VOCABULARY, beyond the embedder's nn.Embedding: on CUDA such an id trips a
    device-side assert that breaks the worker's CUDA context for every later request. The worker
    learns [0, VOCABULARY) from the module, logs it, refuses each with a 400 naming the value and
    the range before it joins a batch, so good requests sent at the same time are served, and so
    is the next one."""
    with serving_embedder(tmp_path, checkpoint, device) as (port, frontend, worker):
        good = token_ids(6, seed=11)
        low = [[-1] + good[0][1:]]
        high = [good[1][:-1] + [VOCABULARY]]
        bodies = [low, [good[2]], high, [good[3]], [good[4], good[5]]]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(bodies)) as pool:
            answers = list(
                pool.map(lambda ids: post(port, "/v1/embeddings", {"model": "embedder", "input": ids}), bodies)
            )
        # Dynamo's frontend reads token ids as unsigned and refuses -1 itself ("Failed to deserialize
        # the JSON body ... EmbeddingInput"); VOCABULARY reaches the worker, which refuses it.
        status, body = answers[0]
        assert status == 400, ("id -1", status, body)
        assert "EmbeddingInput" in body["message"] or f"token id -1 is outside [0, {VOCABULARY})" in body["message"]
        status, body = answers[2]
        assert status == 400, (f"id {VOCABULARY}", status, body)
        assert body["message"] == f"'input[0]': token id {VOCABULARY} is outside [0, {VOCABULARY})", body
        for ids, (status, body) in ((bodies[1], answers[1]), (bodies[3], answers[3]), (bodies[4], answers[4])):
            assert status == 200, ("a request batched beside a bad one failed", body)
            assert_serves_eager(body, ids)
        assert worker.poll() is None and frontend.poll() is None, "an out-of-range id ended a process"
        ids = token_ids(4, seed=12)
        status, body = post(port, "/v1/embeddings", {"model": "embedder", "input": ids})
        assert status == 200, ("the request after the bad ones", body)
        assert_serves_eager(body, ids)
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert (
        f"Request check: token ids must lie in [0, {VOCABULARY}): the module's one torch.nn.Embedding `tokens`" in log
    )
    rejected = int(re.search(r"served 4 requests \((\d+) rejected as bad requests, 0 failed\)", log)[1])
    assert rejected in (1, 2), log[-2000:]  # 2 if the frontend lets -1 through to the worker


def launcher_command(checkpoint: Path, port: int, *options: str) -> list[str]:
    """`python -m aitune.dynamo serve` of the test embedder behind a frontend on `port`."""
    command = [sys.executable, "-m", "aitune.dynamo", "serve", "--model", "dynamo_models:make_embedder"]
    command += ["--checkpoint", str(checkpoint), *options, "--frontend", "--http-host", "127.0.0.1"]
    return command + ["--http-port", str(port), "--model-name", "embedder"]


def serves_sixteen_concurrent_requests(port: int) -> None:
    """16 requests of 2 items from 8 threads, each answered 200 with eager's embeddings."""
    requests = [token_ids(2, seed=s) for s in range(16)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(
            pool.map(lambda ids: post(port, "/v1/embeddings", {"model": "embedder", "input": ids}), requests)
        )
    for ids, (status, body) in zip(requests, answers):
        assert status == 200, body
        served = torch.tensor([d["embedding"] for d in sorted(body["data"], key=lambda d: d["index"])])
        torch.testing.assert_close(served, eager(ids), rtol=1e-5, atol=1e-6)


def test_serve_starts_two_workers_behind_one_frontend(tmp_path, checkpoint):
    """`python -m aitune.dynamo serve --devices cpu,cpu --frontend`: both workers load the
    checkpoint, the frontend routes concurrent requests to both, and stopping the launcher
    stops everything."""
    env, port = environment(tmp_path), free_port()
    log = tmp_path / "serve.log"
    with running(launcher_command(checkpoint, port, "--devices", "cpu,cpu"), env, log) as launcher:
        wait_for(
            lambda: log.read_text(errors="replace").count("Worker ready") == 2 and "embedder" in models(port),
            READY_TIMEOUT_S,
            "two workers ready and the model listed",
            log,
        )
        serves_sixteen_concurrent_requests(port)
    assert launcher.returncode == 0, log.read_text(errors="replace")[-2000:]
    assert session_members(launcher.pid) == [], "processes left running after stop"
    counts = [int(n) for n in re.findall(r"served (\d+) requests", log.read_text(errors="replace"))]
    assert len(counts) == 2 and sum(counts) == 16 and min(counts) > 0, counts


def test_serve_with_fronts_runs_the_model_in_one_engine_process(tmp_path, checkpoint):
    """`serve --fronts 2`: one engine process loads the checkpoint, two Dynamo workers feed it
    over the engine link; answers equal eager, a bad request is refused by a front (400) and the
    rest are served, and stopping the launcher stops all four processes."""
    env, port = environment(tmp_path), free_port()
    log = tmp_path / "serve.log"
    with running(launcher_command(checkpoint, port, "--devices", "cpu", "--fronts", "2"), env, log) as launcher:
        wait_for(
            lambda: log.read_text(errors="replace").count("Worker ready") == 2 and "embedder" in models(port),
            READY_TIMEOUT_S,
            "two fronts ready and the model listed",
            log,
        )
        serves_sixteen_concurrent_requests(port)
        status, body = post(port, "/v1/embeddings", {"model": "embedder", "input": [[VOCABULARY] * SEQUENCE]})
        assert status == 400 and "token id" in str(body), body
    assert launcher.returncode == 0, log.read_text(errors="replace")[-2000:]
    assert session_members(launcher.pid) == [], "processes left running after stop"
    text = log.read_text(errors="replace")
    assert (
        text.count("Engine ready at") == 1
        and "Serving the tuned module's graphs through the batcher, through the engine process at" in text
    )
    counts = [int(n) for n in re.findall(r"served (\d+) requests", text)]
    assert len(counts) == 2 and sum(counts) == 16, counts
    assert int(re.search(r"Engine stopped after (\d+) batches", text)[1]) >= 2


def test_callables_serve_images_and_videos_and_survive_their_own_failures(tmp_path):
    """Plain callables as image and video workers: bytes come back in the OpenAI envelopes; a
    function that raises answers that request with HTTP 500 and the worker serves on."""
    require_dynamo()
    env, port = environment(tmp_path), free_port()
    script = str(Path(__file__).resolve().parents[1] / "helpers" / "dynamo_media_worker.py")
    with (
        running(frontend_command(port), env, tmp_path / "frontend.log") as frontend,
        running([sys.executable, script, "image"], env, tmp_path / "image.log") as image_worker,
        running([sys.executable, script, "video"], env, tmp_path / "video.log") as video_worker,
    ):
        wait_for(
            lambda: {"image-model", "video-model"} <= set(models(port)),
            READY_TIMEOUT_S,
            "both models on /v1/models",
            tmp_path / "image.log",
        )
        status, body = post(port, "/v1/images/generations", {"model": "image-model", "prompt": "a cat"})
        assert status == 200, body
        assert base64.b64decode(body["data"][0]["b64_json"]) == b"image:a cat"
        status, body = post(port, "/v1/images/generations", {"model": "image-model", "prompt": "fail"})
        assert status == 500, body
        status, body = post(port, "/v1/images/generations", {"model": "image-model"})
        assert status == 400 and "prompt" in body["message"], body
        status, body = post(port, "/v1/videos", {"model": "video-model", "prompt": "a dog"})
        assert status == 200 and body["status"] == "completed", body
        assert base64.b64decode(body["data"][0]["b64_json"]) == b"video:a dog"
        status, body = post(port, "/v1/images/generations", {"model": "image-model", "prompt": "again"})
        assert status == 200 and base64.b64decode(body["data"][0]["b64_json"]) == b"image:again"
    for process in (frontend, image_worker, video_worker):
        assert session_members(process.pid) == []
    assert "served 2 requests (0 rejected as bad requests, 1 failed)" in (tmp_path / "image.log").read_text()
