"""The token-id range of a tuned module's integer input (docs/serving.md, "Errors"): where the
worker learns it (get_input_embeddings(), the one nn.Embedding, or token_id_limit), the 400 for
an id outside it, and that such a request is refused before it joins a batch, so the requests
batched with it are served."""

from __future__ import annotations

import asyncio
import types

import pytest
import torch

from aitune.dynamo import DynamoWorkerConfig
from aitune.dynamo.launch import _worker_command, parse
from aitune.dynamo.module_engine import (
    INTEGER_DTYPES,
    ItemShape,
    ModuleEngine,
    TokenIdRange,
    check_token_ids,
    token_id_range,
)
from aitune.dynamo.requests import BadRequest
from aitune.dynamo.worker import FunctionWorker
from aitune.exceptions import InvalidValueError

from dynamo_models import SEQUENCE, VOCABULARY, make_embedder, token_ids, tune_and_save

IDS = [ItemShape("g", torch.int64, [8], [8], [1, 2, 4])]


class OneTable(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(100, 4)
        self.head = torch.nn.Linear(4, 2)


class TwoTables(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.words = torch.nn.Embedding(30522, 4)
        self.positions = torch.nn.Embedding(512, 4)


class TransformersLike(TwoTables):
    """Two tables, but the transformers API names the one the ids index."""

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.words


class NotImplementedGetter(OneTable):
    def get_input_embeddings(self) -> torch.nn.Module:
        raise NotImplementedError  # transformers' PreTrainedModel base does this


def test_get_input_embeddings_gives_the_range_even_with_several_tables():
    found = token_id_range(TransformersLike(), IDS)
    assert found.limit == 30522
    assert "get_input_embeddings()" in found.source and "30522 rows" in found.source


def test_the_one_nn_embedding_gives_the_range():
    found = token_id_range(OneTable(), IDS)
    assert found == TokenIdRange(100, "the module's one torch.nn.Embedding `tokens`, of 100 rows")
    assert token_id_range(NotImplementedGetter(), IDS).limit == 100, "a getter that raises falls through"
    assert token_id_range(torch.nn.Embedding(7, 2), IDS).limit == 7, "the module itself is the table"


def test_two_embeddings_give_no_automatic_range():
    found = token_id_range(TwoTables(), IDS)
    assert found.limit is None
    assert "2 torch.nn.Embedding modules (`words`, `positions`)" in found.source
    assert "--token-id-limit" in found.describe() and found.describe().startswith("no token-id range is enforced")
    assert token_id_range(torch.nn.Linear(2, 2), IDS).limit is None, "no table at all"


def test_one_embedding_is_not_trusted_when_a_graph_takes_several_inputs():
    module = OneTable()
    module.graph_specs = [types.SimpleNamespace(input_spec=types.SimpleNamespace(leaves=["ids", "mask"]))]
    found = token_id_range(module, IDS)
    assert found.limit is None and "several inputs" in found.source


def test_the_explicit_option_wins_and_zero_turns_the_check_off():
    found = token_id_range(OneTable(), IDS, explicit=64)
    assert found.limit == 64
    assert found.source == "the worker's token_id_limit; the module's one torch.nn.Embedding `tokens`, of 100 rows"
    assert token_id_range(TwoTables(), IDS, explicit=30522).limit == 30522, "supplies what discovery cannot"
    off = token_id_range(TransformersLike(), IDS, explicit=0)
    assert off.limit is None and "token_id_limit is 0" in off.source


def test_graphs_of_floating_point_inputs_get_no_range():
    floats = [ItemShape("g", torch.float32, [8], [8], [1])]
    assert token_id_range(OneTable(), floats).limit is None
    assert token_id_range(OneTable(), floats, explicit=5).limit is None, "an explicit limit has nothing to check"


def test_a_learned_range_checks_token_id_dtypes_only_an_explicit_one_every_integer_dtype():
    pixels = [ItemShape("g", torch.uint8, [3 * 8 * 8], [3 * 8 * 8], [1])]
    found = token_id_range(OneTable(), pixels)
    assert found.limit is None and found.source == "no served graph takes int64 or int32 token ids"
    assert token_id_range(OneTable(), pixels, explicit=200) == TokenIdRange(
        200, "the worker's token_id_limit; the module's one torch.nn.Embedding `tokens`, of 100 rows", INTEGER_DTYPES
    )
    assert token_id_range(OneTable(), [ItemShape("g", torch.int32, [4], [4], [1])]).limit == 100


def _engine(dtype: torch.dtype, limit: int | None) -> ModuleEngine:
    engine = ModuleEngine.__new__(ModuleEngine)  # the item shapes only
    engine.shapes = [ItemShape("g", dtype, [3], [3], [1, 2, 4])]
    engine.device = torch.device("cpu")
    engine.token_ids = TokenIdRange(limit, "test", INTEGER_DTYPES)
    return engine


@pytest.mark.parametrize(
    "ids, message",
    [
        ([5, -1, 7], r"^'input\[2\]': token id -1 is outside \[0, 50\)$"),
        ([5, 50, 7], r"^'input\[2\]': token id 50 is outside \[0, 50\)$"),
        ([40000, 0, 1], r"^'input\[2\]': token id 40000 is outside \[0, 50\)$"),
        ([-3, 0, 99], r"^'input\[2\]': token id -3 is outside \[0, 50\)$"),  # the low bound is named first
    ],
)
def test_an_id_outside_the_range_is_a_bad_request_naming_field_value_and_range(ids, message):
    with pytest.raises(BadRequest, match=message):
        _engine(torch.int64, 50).item(ids, 2)


def test_ids_inside_the_range_pass_and_other_dtypes_are_checked_alike():
    key, tensor = _engine(torch.int64, 50).item([0, 49, 7], 0)
    assert key == (0, (3,)) and tensor.tolist() == [0, 49, 7]
    assert _engine(torch.int64, None).item([0, 4900, -7], 0)[1].tolist() == [0, 4900, -7], "no range: no check"
    with pytest.raises(BadRequest, match=r"token id 50 is outside \[0, 50\)"):
        _engine(torch.int32, 50).item([0, 50, 1], 0)
    # uint8 wraps -1 around to 255 (torch.tensor's rule): the request's own value is named.
    with pytest.raises(BadRequest, match=r"token id -1 is outside \[0, 200\)"):
        _engine(torch.uint8, 200).item([0, -1, 1], 0)
    with pytest.raises(BadRequest, match=r"token id 201 is outside \[0, 200\)"):
        _engine(torch.uint8, 200).item([0, 201, 1], 0)
    assert _engine(torch.float32, 2).item([0, 5, 9], 0)[1].tolist() == [0.0, 5.0, 9.0], "not token ids"
    check_token_ids(torch.tensor([], dtype=torch.int64), [], 1, 0)  # nothing to check


def test_config_and_cli_carry_the_option():
    assert DynamoWorkerConfig(type="embedding", model_path="m").token_id_limit is None
    assert DynamoWorkerConfig(type="embedding", model_path="m", token_id_limit=0).token_id_limit == 0
    for bad in (-1, True, 1.5, "50"):
        with pytest.raises(InvalidValueError, match="DynamoWorkerConfig.token_id_limit must be None"):
            DynamoWorkerConfig(type="embedding", model_path="m", token_id_limit=bad)
    common = ["--model", "m:f", "--checkpoint", "c.ait"]
    assert parse(["worker", *common]).token_id_limit is None
    args = parse(["serve", *common, "--devices", "cpu,cpu", "--token-id-limit", "30522"])
    assert args.token_id_limit == 30522
    command = _worker_command(args, "cpu")
    assert command[command.index("--token-id-limit") + 1] == "30522"
    assert "--token-id-limit" not in _worker_command(parse(["serve", *common, "--devices", "cpu"]), "cpu")


async def _first(generator):
    async for chunk in generator:
        return chunk


def test_a_tuned_module_refuses_out_of_range_ids_before_the_batch_and_serves_the_others(tmp_path, aitune_log):
    """The worker learns [0, VOCABULARY) from the tuned embedder's one nn.Embedding and logs it;
    requests with -1 or VOCABULARY, sent together with good ones, get BadRequest and never reach
    the batcher, whose batch (the good ones) is served."""
    import aitune.torch as ait

    loaded = ait.load(make_embedder(), tune_and_save(tmp_path / "e.ait"), device_map={"embedder": "cpu"})
    worker = FunctionWorker(loaded, DynamoWorkerConfig(type="embedding", model_path="e", max_wait_ms=50))
    worker.setup()
    assert worker.engine.token_ids.limit == VOCABULARY
    checks = [r.getMessage() for r in aitune_log.records if r.getMessage().startswith("Request check: ")]
    assert checks == [
        f"Request check: token ids must lie in [0, {VOCABULARY}): the module's one torch.nn.Embedding `tokens`, "
        f"of {VOCABULARY} rows"
    ]
    good = token_ids(3, seed=4)
    low, high = [-1] + good[0][1:], good[1][:-1] + [VOCABULARY]

    async def scenario():
        requests = [{"input": good[0]}, {"input": [good[2], low]}, {"input": good[1]}, {"input": [high]}]
        requests.append({"input": good[2]})
        answers = await asyncio.gather(*(_first(worker.serve(r)) for r in requests), return_exceptions=True)
        await worker.batcher.close()
        return answers

    answers = asyncio.run(scenario())
    assert (
        isinstance(answers[1], BadRequest)
        and str(answers[1]) == f"'input[1]': token id -1 is outside [0, {VOCABULARY})"
    )
    assert isinstance(answers[3], BadRequest) and str(answers[3]) == (
        f"'input[0]': token id {VOCABULARY} is outside [0, {VOCABULARY})"
    )
    with torch.no_grad():
        expected = make_embedder()(torch.tensor(good))
    for answer, row in zip((answers[0], answers[2], answers[4]), expected):
        assert isinstance(answer, dict), answer
        torch.testing.assert_close(torch.tensor(answer["data"][0]["embedding"]), row, rtol=1e-5, atol=1e-6)
    stats = worker.stats()
    assert (stats["served"], stats["rejected"], stats["failed"]) == (3, 2, 0)
    assert stats["items"] == 3, "the refused requests' items (the good one beside -1 too) never reached the batcher"
    assert len(good[0]) == SEQUENCE


def test_an_explicit_limit_overrides_the_module_and_a_callable_worker_warns_it_is_unused(tmp_path, aitune_log):
    import aitune.torch as ait

    loaded = ait.load(make_embedder(), tune_and_save(tmp_path / "e.ait"), device_map={"embedder": "cpu"})
    engine = ModuleEngine(loaded, token_id_limit=10)
    assert engine.token_ids.limit == 10 and f"of {VOCABULARY} rows" in engine.token_ids.source
    with pytest.raises(BadRequest, match=r"'input\[0\]': token id 10 is outside \[0, 10\)"):
        engine.item([10] * SEQUENCE, 0)
    assert max(ModuleEngine(loaded, token_id_limit=0).item([VOCABULARY] * SEQUENCE, 0)[1]) == VOCABULARY
    FunctionWorker(lambda text: [[0.0]], DynamoWorkerConfig(type="embedding", model_path="m", token_id_limit=9)).setup()
    assert any("token_id_limit=9 is not checked" in r.getMessage() for r in aitune_log.records)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8])
def test_large_items_are_checked_through_their_tensor_and_small_ones_through_the_list(dtype):
    """Both sides of LIST_CHECK_MAX_VALUES give the same verdict and message."""
    from aitune.dynamo.module_engine import LIST_CHECK_MAX_VALUES

    for length in (LIST_CHECK_MAX_VALUES, LIST_CHECK_MAX_VALUES + 1):
        engine = _engine(dtype, 200)
        engine.shapes[0].min_shape = engine.shapes[0].max_shape = [length]
        ids = [5] * length
        assert max(engine.item(ids, 0)[1]) == 5
        ids[-1] = 200
        with pytest.raises(BadRequest, match=r"'input\[3\]': token id 200 is outside \[0, 200\)"):
            engine.item(ids, 3)
        ids[-1] = -1  # uint8: torch.tensor wraps it to 255; the request's own value is named
        with pytest.raises(BadRequest, match=r"token id -1 is outside \[0, 200\)"):
            engine.item(ids, 3)
