"""aitune.dynamo as AITune's users write against it (docs/serving.md): DynamoWorker is a plain
base class whose setup() and serve() raise NotImplementedError when called; every configuration
error of dynamo_worker is a ValueError (or TypeError) raised before the Dynamo runtime starts;
a mapping reads the request's fields as attributes (`req.input`), as AITune's guide writes it.
Stopping under the real runtime: tests/e2e/test_dynamo_stop.py."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import torch

from aitune.dynamo import DynamoWorker, DynamoWorkerConfig, dynamo_worker
from aitune.dynamo.requests import BadRequest, Request, call_input


def test_a_subclass_without_serve_can_be_created_and_serve_raises_when_called():
    class Bare(DynamoWorker):
        pass

    worker = Bare()  # not abstract
    with pytest.raises(NotImplementedError, match="setup"):
        worker.setup()

    async def first_chunk():
        return await worker.serve({"input": "x"}).__anext__()

    with pytest.raises(NotImplementedError, match="serve"):
        asyncio.run(first_chunk())
    assert (Bare.namespace, Bare.component, Bare.endpoint_name) == ("aitune", "backend", "generate")


def _config_bypassing_its_checks(**fields) -> DynamoWorkerConfig:
    """A config whose fields were set without __init__ (AITune's test of the runtime check)."""
    config = DynamoWorkerConfig.__new__(DynamoWorkerConfig)
    for f in dataclasses.fields(DynamoWorkerConfig):
        object.__setattr__(config, f.name, fields.get(f.name, f.default))
    return config


def test_an_unknown_type_is_a_value_error_before_the_runtime_starts():
    with pytest.raises(ValueError, match="unknown_modality"):
        dynamo_worker(lambda req: None, _config_bypassing_its_checks(type="unknown_modality", model_path="org/m"))
    config = DynamoWorkerConfig(type="embedding", model_path="org/m")
    config.type = "audio"  # changed after it was made
    with pytest.raises(ValueError, match="'audio'"):
        dynamo_worker(lambda req: None, config)
    with pytest.raises(ValueError, match="namespace"):
        DynamoWorkerConfig(type="image", model_path="m", namespace="a.b")


def test_wrong_kinds_are_type_errors():
    with pytest.raises(TypeError, match="DynamoWorkerConfig"):
        dynamo_worker(lambda req: None, {"type": "embedding"})
    with pytest.raises(TypeError, match="callable"):
        dynamo_worker(42, DynamoWorkerConfig(type="embedding", model_path="m"))


def test_a_torch_module_that_is_not_a_tuned_embedder_needs_a_mapping():
    class MyModule(torch.nn.Module):
        def forward(self, x):
            return x

    with pytest.raises(ValueError, match="mapping"):
        dynamo_worker(MyModule(), DynamoWorkerConfig(type="embedding", model_path="org/model"))
    with pytest.raises(ValueError, match="mapping"):
        dynamo_worker(MyModule(), DynamoWorkerConfig(type="image", model_path="org/model"))


def test_a_mapping_reads_fields_as_attributes_or_keys():
    def mapping(req):
        sentences = req.input if isinstance(req.input, list) else [req.input]
        return {"sentences": sentences, "seed": req["nvext"].seed}

    config = DynamoWorkerConfig(type="embedding", model_path="m", mapping=mapping)
    args, kwargs = call_input({"model": "m", "input": "hi", "nvext": {"seed": 3}}, config)
    assert (args, kwargs) == ((), {"sentences": ["hi"], "seed": 3})
    with pytest.raises(BadRequest, match="has no field 'input'"):
        call_input({"model": "m", "nvext": {"seed": 3}}, config)
    request = Request({"a": {"b": 1}})
    assert request.a.b == 1 and request["a"]["b"] == 1 and isinstance(request, dict)
