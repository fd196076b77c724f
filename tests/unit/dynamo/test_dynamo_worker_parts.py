"""The Dynamo worker's parts that need no Dynamo (docs/serving.md): the config's checks, reading
requests, packing responses, the batch plan and the dynamic batcher, serving a tuned module's
graphs, and the message when the optional dependency is missing."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

from aitune.dynamo import DynamoWorkerConfig
from aitune.dynamo.batching import DynamicBatcher, batch_plan
from aitune.dynamo.module_engine import ModuleEngine
from aitune.dynamo.packing import embedding_vectors, pack_embeddings, pack_images, pack_videos
from aitune.dynamo.requests import BadRequest, call_input, embedding_options, token_sequences
from aitune.exceptions import AITuneUserInputError

from dynamo_models import TUNED_BATCH_SIZES, make_embedder, token_ids, tune_and_save


# -- config ------------------------------------------------------------------------------------
def test_config_names_the_bad_field_and_the_allowed_values():
    with pytest.raises(AITuneUserInputError, match=r"type must be one of embedding, image, video; got 'audio'"):
        DynamoWorkerConfig(type="audio", model_path="m")
    with pytest.raises(AITuneUserInputError, match=r"model_path must be a non-empty string; got ''"):
        DynamoWorkerConfig(type="image", model_path="")
    with pytest.raises(AITuneUserInputError, match=r"namespace must be a non-empty name without dots"):
        DynamoWorkerConfig(type="image", model_path="m", namespace="a.b")
    with pytest.raises(AITuneUserInputError, match=r"mapping must be None, a callable"):
        DynamoWorkerConfig(type="image", model_path="m", mapping=3)
    config = DynamoWorkerConfig(type="embedding", model_path="/models/e.ait")
    assert (config.endpoint_path, config.served_name) == ("aitune.backend.generate", "/models/e.ait")
    assert DynamoWorkerConfig(type="video", model_path="p", model_name="v").served_name == "v"


# -- requests ----------------------------------------------------------------------------------
def test_token_sequences_accept_openai_token_forms_and_refuse_the_rest():
    assert token_sequences({"input": [1, 2, 3]}) == [[1, 2, 3]]
    assert token_sequences({"input": [[1, 2], [3, 4]]}) == [[1, 2], [3, 4]]
    with pytest.raises(BadRequest, match="must be token ids .* got text"):
        token_sequences({"input": "hello"})
    with pytest.raises(BadRequest, match=r"'input\[1\]' must be a non-empty list of token ids"):
        token_sequences({"input": [[1, 2], []]})
    with pytest.raises(BadRequest, match="the request has no field 'input'"):
        token_sequences({"model": "m"})
    with pytest.raises(BadRequest, match="must be a non-empty list of token ids, got an empty list"):
        token_sequences({"input": []})


def test_embedding_options_follow_openai():
    assert embedding_options({}) == ("float", None)
    assert embedding_options({"encoding_format": "base64", "dimensions": 4}) == ("base64", 4)
    with pytest.raises(BadRequest, match="'encoding_format' must be 'float' or 'base64', got 'hex'"):
        embedding_options({"encoding_format": "hex"})
    with pytest.raises(BadRequest, match="'dimensions' must be an integer >= 1, got 0"):
        embedding_options({"dimensions": 0})


def test_call_input_maps_requests_by_field_or_function():
    image = DynamoWorkerConfig(type="image", model_path="m")
    assert call_input({"prompt": "a cat"}, image) == (("a cat",), {})
    by_fields = DynamoWorkerConfig(type="image", model_path="m", mapping={"text": "prompt", "seed": "nvext.seed"})
    assert call_input({"prompt": "a cat", "nvext": {"seed": 3}}, by_fields) == ((), {"text": "a cat", "seed": 3})
    with pytest.raises(BadRequest, match="the request has no field 'nvext.seed'"):
        call_input({"prompt": "a cat"}, by_fields)
    by_function = DynamoWorkerConfig(type="video", model_path="m", mapping=lambda r: (r["prompt"], r["size"]))
    assert call_input({"prompt": "p", "size": "8x8"}, by_function) == (("p", "8x8"), {})
    with pytest.raises(BadRequest, match="could not be mapped to the model's input: KeyError"):
        call_input({"prompt": "p"}, by_function)


# -- packing -----------------------------------------------------------------------------------
def test_embeddings_pack_as_openai_lists_floats_or_base64():
    vectors = embedding_vectors(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    assert vectors == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert embedding_vectors(np.array([0.5, 1.5])) == [[0.5, 1.5]]  # one vector: one item
    packed = pack_embeddings(vectors, "m", dimensions=2, prompt_tokens=6)
    assert packed["data"] == [
        {"object": "embedding", "embedding": [1.0, 2.0], "index": 0},
        {"object": "embedding", "embedding": [4.0, 5.0], "index": 1},
    ]
    assert packed["usage"] == {"prompt_tokens": 6, "total_tokens": 6} and packed["object"] == "list"
    encoded = pack_embeddings(vectors, "m", encoding_format="base64")["data"][1]["embedding"]
    assert struct.unpack("<3f", base64.b64decode(encoded)) == (4.0, 5.0, 6.0)
    with pytest.raises(BadRequest, match="'dimensions' is 4 but the model's embeddings have 3"):
        pack_embeddings(vectors, "m", dimensions=4)
    with pytest.raises(TypeError, match=r"must return vectors .* got a str"):
        embedding_vectors("not vectors")


def test_images_and_videos_pack_into_their_envelopes():
    images = pack_images([b"\x89PNG1", "https://host/x.png"], "m")
    assert images["data"] == [{"b64_json": base64.b64encode(b"\x89PNG1").decode()}, {"url": "https://host/x.png"}]
    assert isinstance(images["created"], int)
    video = pack_videos(b"mp4bytes", "m", "mp4")
    assert video["object"] == "video" and video["status"] == "completed" and video["model"] == "m"
    assert video["data"] == [{"output_format": "mp4", "b64_json": base64.b64encode(b"mp4bytes").decode()}]
    assert pack_images({"created": 1, "data": []}, "m") == {"created": 1, "data": []}  # passthrough
    with pytest.raises(TypeError, match=r"image worker's function must return encoded image bytes .* got a Tensor"):
        pack_images(torch.zeros(2), "m")
    with pytest.raises(TypeError, match="video worker's function must return encoded video bytes"):
        pack_videos("x.mp4", "m")


# -- batching ----------------------------------------------------------------------------------
def test_batch_plan_uses_tuned_sizes_and_pads_the_rest():
    assert batch_plan(1, [1, 2, 4]) == [(1, 1)]
    assert batch_plan(3, [1, 2, 4]) == [(3, 4)]
    assert batch_plan(9, [1, 2, 4]) == [(4, 4), (4, 4), (1, 1)]
    assert batch_plan(3, [2, 8]) == [(3, 8)]
    assert batch_plan(1, [2, 4]) == [(1, 2)]  # below the smallest tuned size: padded up to it


def test_batcher_groups_concurrent_requests_into_tuned_batches_and_isolates_failures():
    calls: list[tuple[object, int, int]] = []
    threads = set()

    def run_batch(key, items, padded):
        threads.add(threading.current_thread().name)
        calls.append((key, len(items), padded))
        if any(item == "boom" for item in items):
            raise RuntimeError("model failure")
        time.sleep(0.01)
        return [f"out:{item}" for item in items]

    async def scenario():
        batcher = DynamicBatcher(run_batch, lambda key: [1, 2, 4], max_wait_s=0.05)
        ok = [batcher.submit([("a", f"r{i}")]) for i in range(3)]
        results = await asyncio.gather(*ok)
        failing = await asyncio.gather(batcher.submit([("b", "boom")]), return_exceptions=True)
        after = await batcher.submit([("a", "x"), ("a", "y")])
        await batcher.close()
        return results, failing, after, batcher

    results, failing, after, batcher = asyncio.run(scenario())
    assert results == [["out:r0"], ["out:r1"], ["out:r2"]]
    assert calls[0] == ("a", 3, 4), "three concurrent requests run as one batch padded to the tuned size 4"
    assert isinstance(failing[0], RuntimeError) and "model failure" in str(failing[0])
    assert after == ["out:x", "out:y"], "a failed batch does not stop the batcher"
    # Batches run in the model thread; "after" found the model idle longer than the failed call
    # took, so it may run on the loop's thread (docs/serving.md, "Batching").
    assert "aitune-model_0" in threads and threads <= {"aitune-model_0", threading.main_thread().name}
    assert batcher.batches_run == 2 and batcher.items_run == 5
    stats = batcher.stats()  # what ran: the failed call counts only in the busy time
    assert stats["calls_by_size"] == {"2": 1, "4": 1} and stats["padding_rows"] == 1
    assert (stats["batches"], stats["items"]) == (2, 5)
    assert 0.02 <= stats["model_busy_s"] < 5, "two 10 ms calls and the failed one, timed"


def test_module_engine_serves_a_tuned_module_at_its_tuned_batch_sizes(tmp_path):
    import aitune.torch as ait

    loaded = ait.load(make_embedder(), tune_and_save(tmp_path / "e.ait"), device_map={"embedder": "cpu"})
    engine = ModuleEngine(loaded)
    assert [s.batch_sizes for s in engine.shapes] == [TUNED_BATCH_SIZES]
    ids = token_ids(3, seed=5)
    keyed = [engine.item(seq, i) for i, seq in enumerate(ids)]
    rows = engine.run_batch(keyed[0][0], [t for _, t in keyed], padded=4)
    with torch.no_grad():
        expected = make_embedder()(torch.tensor(ids))
    assert len(rows) == 3 and all(type(v) is float for row in rows for v in row), "lists of Python floats"
    torch.testing.assert_close(torch.tensor(rows), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(BadRequest, match=r"'input\[2\]' has 5 token ids; the tuned model accepts item shapes \[8\]"):
        engine.item([1, 2, 3, 4, 5], 2)
    with pytest.raises(TypeError, match="serves a torch module directly only when it is a tuned ait.Module"):
        ModuleEngine(make_embedder())
    engine.check_request_size(max(TUNED_BATCH_SIZES))
    with pytest.raises(BadRequest, match=r"'input' has 5 items; the tuned model runs at most 4 per call"):
        engine.check_request_size(5)


def test_worker_stats_count_requests_and_batches_and_log_one_json_line(tmp_path, caplog):
    """The counters a worker logs on SIGUSR1 and at shutdown (`Stats: {...}`, docs/serving.md)."""
    import aitune.torch as ait
    from aitune.dynamo.worker import FunctionWorker

    loaded = ait.load(make_embedder(), tune_and_save(tmp_path / "e.ait"), device_map={"embedder": "cpu"})
    worker = FunctionWorker(loaded, DynamoWorkerConfig(type="embedding", model_path="e", max_wait_ms=50))
    worker.setup()

    async def scenario():
        requests = [{"input": ids} for ids in token_ids(3, seed=2)] + [{"input": [1, 2]}, {"input": token_ids(5)}]
        answers = await asyncio.gather(*(_first(worker.serve(r)) for r in requests), return_exceptions=True)
        await worker.batcher.close()
        return answers

    answers = asyncio.run(scenario())
    assert [type(a).__name__ for a in answers] == ["dict", "dict", "dict", "BadRequest", "BadRequest"]
    stats = worker.stats()
    assert {k: stats[k] for k in ("served", "rejected", "failed", "batches", "items", "padding_rows")} == {
        "served": 3,
        "rejected": 2,
        "failed": 0,
        "batches": 1,
        "items": 3,
        "padding_rows": 1,
    }
    assert stats["calls_by_size"] == {"4": 1} and stats["tuned_batch_sizes"] == TUNED_BATCH_SIZES
    caplog.set_level(logging.INFO, logger="aitune.dynamo")
    worker.log_stats()
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("Stats: "))
    assert json.loads(line.removeprefix("Stats: "))["served"] == 3


async def _first(generator):
    async for chunk in generator:
        return chunk


def test_missing_dynamo_is_named_with_the_install_command():
    code = (
        "import sys; sys.modules['dynamo'] = None\n"
        "from aitune.dynamo import DynamoWorkerConfig, dynamo_worker\n"
        "try:\n"
        "    dynamo_worker(lambda p: b'x', DynamoWorkerConfig(type='image', model_path='m'))\n"
        "except ImportError as e:\n"
        "    print('ImportError:', e)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ImportError: aitune's Dynamo workers need NVIDIA Dynamo: pip install 'aitune[dynamo]'" in result.stdout, (
        result.stdout + result.stderr
    )
