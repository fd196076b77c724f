"""TorchAOBackendConfig in AITune's form: fields and defaults, validation, key(), describe(),
to_dict/from_dict without pickle (docs/reference/backends.md#torchao-torchaobackend). Nothing here
compiles; the tests that use torchao's own config classes need torchao and skip without it."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
import torch

from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend import TorchAOBackend, TorchAOBackendConfig
from aitune.torch.backend.backend import availability
from aitune.torch.backend.torchao import QUANTIZATION_PRESETS, SelectedModules
from aitune.torch.backend.torchao.torchao_config import SAVED_STATE_KEY
from aitune.torch.backend.torchao_backend import DEFAULT_QUANTIZATION

torchao = pytest.importorskip("torchao", reason="torchao is not installed (pip install 'aitune[torchao]')")
from torchao.quantization import (  # noqa: E402
    Float8DynamicActivationFloat8WeightConfig,
    Int8WeightOnlyConfig,
    PerGroup,
    PerRow,
    PerTensor,
)


def test_fields_and_defaults_are_aitunes():
    fields = {f.name: f.default for f in dataclasses.fields(TorchAOBackendConfig)}
    assert fields == {
        "fullgraph": False,
        "dynamic": None,
        "mode": "max-autotune",
        "quantization": None,
        "quantization_config": None,
        "filter_fn": None,
        "use_cuda_graphs": False,
    }
    assert QUANTIZATION_PRESETS == ("int8wo", "int8dq", "fp8wo", "fp8dq", "mxfp8dq", "nvfp4dq")
    assert DEFAULT_QUANTIZATION == "fp8wo"
    assert TorchAOBackend().config.quantization == "fp8wo"


def test_every_preset_constructs_and_exactly_one_of_the_two_is_required():
    for preset in QUANTIZATION_PRESETS:
        assert TorchAOBackendConfig(quantization=preset).scheme == preset
    TorchAOBackendConfig(quantization_config=Int8WeightOnlyConfig())
    with pytest.raises(ValueError, match="Only one of quantization or quantization_config should be provided."):
        TorchAOBackendConfig(quantization="int8wo", quantization_config=Int8WeightOnlyConfig())
    with pytest.raises(ValueError, match="Either quantization or quantization_config should be provided."):
        TorchAOBackendConfig()
    with pytest.raises(ValueError, match="Invalid quantization: 'int3'"):
        TorchAOBackendConfig(quantization="int3")
    with pytest.raises(ValueError, match="Invalid mode"):
        TorchAOBackendConfig(quantization="int8wo", mode="fastest")
    with pytest.raises(TypeError, match="must be a torchao AOBaseConfig"):
        TorchAOBackendConfig(quantization_config={"group_size": 32})
    with pytest.raises(TypeError, match="aitune loads no pickle"):
        TorchAOBackendConfig(quantization_config=b"\x80\x04dill")
    with pytest.raises(TypeError, match="filter_fn must be a callable"):
        TorchAOBackendConfig(quantization="int8wo", filter_fn="linear")
    with pytest.raises(ValueError, match="dynamic must be True, False or None"):
        TorchAOBackendConfig(quantization="int8wo", dynamic="yes")


def test_cuda_graphs_need_a_mode_that_does_not_capture_graphs_itself():
    for mode in ("max-autotune", "reduce-overhead"):
        with pytest.raises(ValueError, match="use_cuda_graphs=True cannot be combined with mode="):
            TorchAOBackendConfig(quantization="int8wo", mode=mode, use_cuda_graphs=True)
    TorchAOBackendConfig(quantization="int8wo", mode="max-autotune-no-cudagraphs", use_cuda_graphs=True)
    TorchAOBackendConfig(quantization="int8wo", mode="default", use_cuda_graphs=True)


def test_key_is_stable_and_sees_every_compile_option():
    assert TorchAOBackendConfig(quantization="int8wo").key() == TorchAOBackendConfig(quantization="int8wo").key()
    keys = {
        TorchAOBackendConfig(quantization="int8wo").key(),
        TorchAOBackendConfig(quantization="int8wo", dynamic=True).key(),
        TorchAOBackendConfig(quantization="int8wo", fullgraph=True).key(),
        TorchAOBackendConfig(quantization="int8wo", mode="reduce-overhead").key(),
        TorchAOBackendConfig(quantization="int8dq").key(),
        TorchAOBackendConfig(quantization_config=Int8WeightOnlyConfig()).key(),
        TorchAOBackendConfig(quantization_config=Int8WeightOnlyConfig(granularity=PerGroup(32))).key(),
    }
    assert len(keys) == 7


def test_key_tells_filter_functions_apart():
    def keep_q(module, fqn):
        return fqn.endswith("q")

    def keep_k(module, fqn):
        return fqn.endswith("k")

    a = TorchAOBackendConfig(quantization="int8wo", filter_fn=keep_q)
    assert a.key() == TorchAOBackendConfig(quantization="int8wo", filter_fn=keep_q).key()
    assert a.key() != TorchAOBackendConfig(quantization="int8wo", filter_fn=keep_k).key()
    assert a.key() != TorchAOBackendConfig(quantization="int8wo").key()


def test_describe_in_aitunes_form():
    assert TorchAOBackendConfig(quantization="int8wo").describe() == "quantization=int8wo"
    changed = TorchAOBackendConfig(quantization="int8wo", fullgraph=True, dynamic=False, mode="reduce-overhead")
    assert changed.describe() == "fullgraph=True,dynamic=False,mode=reduce-overhead,quantization=int8wo"
    assert TorchAOBackendConfig(quantization_config=Int8WeightOnlyConfig()).describe() == (
        "quantization_config=Int8WeightOnlyConfig()"
    )
    custom = TorchAOBackendConfig(quantization_config=Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))
    assert custom.describe() == (
        "quantization_config=Float8DynamicActivationFloat8WeightConfig(granularity=[PerRow(),PerRow()])"
    )
    graphs = TorchAOBackend(TorchAOBackendConfig(quantization="fp8dq", mode="default", use_cuda_graphs=True))
    assert graphs.describe() == "TorchAOBackend(mode=default,quantization=fp8dq,use_cuda_graphs=True)"


def test_precision_class_follows_the_scheme():
    classes = {p: TorchAOBackend(TorchAOBackendConfig(quantization=p)).precision_class for p in QUANTIZATION_PRESETS}
    assert classes == {
        "int8wo": "int8",
        "int8dq": "int8",
        "fp8wo": "fp8",
        "fp8dq": "fp8",
        "mxfp8dq": "fp8",
        "nvfp4dq": "fp8",
    }
    assert TorchAOBackend(TorchAOBackendConfig(quantization_config=Int8WeightOnlyConfig())).precision_class == "int8"
    from torchao.quantization import Int4WeightOnlyConfig

    # Anything else is judged by the loose class.
    assert TorchAOBackend(TorchAOBackendConfig(quantization_config=Int4WeightOnlyConfig())).precision_class == "fp8"


@pytest.mark.parametrize(
    "make",
    [
        lambda: TorchAOBackendConfig(quantization="fp8wo"),
        lambda: TorchAOBackendConfig(quantization="int8wo", fullgraph=True, dynamic=True, mode="reduce-overhead"),
        lambda: TorchAOBackendConfig(
            quantization_config=Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())
        ),
        lambda: TorchAOBackendConfig(quantization_config=Int8WeightOnlyConfig(granularity=PerGroup(16))),
        lambda: TorchAOBackendConfig(quantization="int8dq", filter_fn=SelectedModules(["layers.0.q", "layers.1.q"])),
    ],
    ids=["preset", "compile-options", "fp8-per-row", "int8-per-group", "selected-modules"],
)
def test_dict_round_trip_is_json_and_equal(make):
    config = make()
    data = config.to_dict()
    text = json.dumps(data)  # JSON only: no pickle anywhere
    restored = TorchAOBackendConfig.from_dict(json.loads(text))
    assert restored == config
    assert restored.key() == config.key()
    assert restored.describe() == config.describe()


def test_from_dict_takes_aitunes_yaml_form():
    config = TorchAOBackendConfig.from_dict({"quantization": "fp8wo"})
    assert config.quantization == "fp8wo"
    assert type(config.resolved_quantization_config()).__name__ == "Float8WeightOnlyConfig"
    fp8dq = TorchAOBackendConfig.from_dict({"quantization": "fp8dq"}).resolved_quantization_config()
    assert fp8dq.granularity == [PerTensor(), PerTensor()]


def test_from_dict_refuses_pickle_and_functions():
    with pytest.raises(ValueError, match="pickled bytes .* aitune loads no pickle"):
        TorchAOBackendConfig.from_dict({"quantization_config": b"\x80\x04\x95"})
    saved = TorchAOBackendConfig(quantization="int8wo", filter_fn=lambda m, fqn: True).to_dict()
    assert saved["filter_fn"]["function"].endswith("<lambda>")
    with pytest.raises(ValueError, match="saved filter_fn was the Python function"):
        TorchAOBackendConfig.from_dict(saved)
    with pytest.raises(ValueError, match="has no field"):
        TorchAOBackendConfig.from_dict({"quantization": "int8wo", "calibration": 3})


def _saved(config_node):
    return {"quantization_config": config_node}


def test_from_dict_resolves_class_names_among_torchaos_config_classes_only():
    before = set(sys.modules)
    for name in ("os.system", "system", "Popen", "quantize_"):
        with pytest.raises(ValueError, match="is not a torchao config, granularity, layout or enum class"):
            TorchAOBackendConfig.from_dict(_saved({"type": name, "fields": {}}))
    assert not {m for m in set(sys.modules) - before if m.split(".")[0] in ("os", "subprocess")}
    with pytest.raises(ValueError, match="expected a torchao AOBaseConfig subclass"):
        TorchAOBackendConfig.from_dict(_saved({"type": "PerRow", "fields": {"dim": -1}}))
    with pytest.raises(ValueError, match="which this torchao's Int8WeightOnlyConfig does not have"):
        TorchAOBackendConfig.from_dict(_saved({"type": "Int8WeightOnlyConfig", "fields": {"bits": 3}}))
    with pytest.raises(ValueError, match="is not an enum member"):
        TorchAOBackendConfig.from_dict(
            _saved(
                {
                    "type": "Int8DynamicActivationInt8WeightConfig",
                    "fields": {"act_mapping_type": {"enum": "MappingType", "member": "__class__"}},
                }
            )
        )
    deep = {"type": "Int8WeightOnlyConfig", "fields": {"granularity": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}}
    with pytest.raises(ValueError, match="nests deeper"):
        TorchAOBackendConfig.from_dict(_saved(deep))


def test_a_config_with_a_function_inside_keeps_a_key_but_cannot_be_restored():
    config = Int8WeightOnlyConfig()
    config.granularity = len  # not data: what dill would have pickled
    wrapped = TorchAOBackendConfig(quantization_config=config)
    data = wrapped.to_dict()
    assert "cannot be saved without pickle" in data["quantization_config"]["not_saveable"]
    assert wrapped.key() == TorchAOBackendConfig(quantization_config=config).key()
    with pytest.raises(ValueError, match="could not be saved"):
        TorchAOBackendConfig.from_dict(data)


def test_saved_state_record_is_validated():
    good = {"sha256": "a" * 64, "modules": 2, "bytes": 10, "torchao": "0.17.0", "device": "cpu", "scheme": "int8wo"}
    config = TorchAOBackendConfig.from_dict({"quantization": "int8wo", SAVED_STATE_KEY: good})
    assert config.expected_quantized_state == good
    assert TorchAOBackendConfig.from_dict({"quantization": "int8wo"}).expected_quantized_state is None
    for bad in ({**good, "sha256": "xyz"}, {**good, "modules": "2"}, "abc"):
        with pytest.raises(ValueError, match=f"saved {SAVED_STATE_KEY} must be"):
            TorchAOBackendConfig.from_dict({"quantization": "int8wo", SAVED_STATE_KEY: bad})


def test_without_torchao_the_backend_is_skipped_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchao", None)  # what a missing package looks like to imports
    backend = TorchAOBackend(TorchAOBackendConfig(quantization="int8wo"))
    assert backend.is_available() == (
        False,
        "torchao is not installed. Please install `torchao` (pip install 'aitune[torchao]').",
    )
    assert availability(backend, torch.device("cpu"))[0] is False
    with pytest.raises(BackendUnavailableError, match="torchao is not installed"):
        backend.build(torch.nn.Linear(4, 4), None, [], "cpu", "/tmp/unused-aitune-torchao")


def test_device_requirements_name_the_compute_capability():
    cpu = torch.device("cpu")
    assert availability(TorchAOBackend(TorchAOBackendConfig(quantization="int8wo")), cpu) == (True, "")
    assert availability(TorchAOBackend(TorchAOBackendConfig(quantization="fp8wo")), cpu) == (True, "")
    ok, reason = availability(TorchAOBackend(TorchAOBackendConfig(quantization="fp8dq")), cpu)
    assert not ok and reason == (
        "fp8dq needs a CUDA GPU of compute capability 8.9 (sm_89, Ada Lovelace or Hopper) or newer; the tuning device "
        "is cpu"
    )
    ok, reason = availability(TorchAOBackend(TorchAOBackendConfig(quantization="nvfp4dq")), cpu)
    assert not ok and "compute capability 10.0 (sm_100, Blackwell) or newer" in reason
    custom = TorchAOBackend(TorchAOBackendConfig(quantization_config=Float8DynamicActivationFloat8WeightConfig()))
    assert "Float8DynamicActivationFloat8WeightConfig needs a CUDA GPU" in availability(custom, cpu)[1]


def test_the_saved_class_table_needs_torchao(monkeypatch):
    from aitune.torch.backend.torchao import ao_config_json

    monkeypatch.setattr(ao_config_json, "_registry", None)
    monkeypatch.setitem(sys.modules, "torchao", None)
    with pytest.raises(BackendUnavailableError, match="torchao is not installed"):
        TorchAOBackendConfig.from_dict(_saved({"type": "Int8WeightOnlyConfig", "fields": {}}))


def test_a_damaged_saved_config_fails_with_a_typed_error_only():
    """A checkpoint's config is hostile input: random damage to valid to_dict() forms raises
    ValueError or TypeError (or BackendUnavailableError), never anything else."""
    import copy
    import random

    record = {"sha256": "a" * 64, "modules": 1, "bytes": 3, "torchao": "0.17.0", "device": "cpu", "scheme": "int8wo"}
    seeds = [
        TorchAOBackendConfig(
            quantization_config=Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())
        ).to_dict(),
        TorchAOBackendConfig(quantization_config=Int8WeightOnlyConfig(granularity=PerGroup(16))).to_dict(),
        {**TorchAOBackendConfig(quantization="int8wo").to_dict(), SAVED_STATE_KEY: record},
    ]
    values = [None, 0, -1, 1.5, True, "", "int8wo", [], {}, [[[[]]]], {"modules": ["a"]}, {"function": "f"}]
    values += [{"type": "PerRow", "fields": {}}, {"enum": "MappingType", "member": "SYMMETRIC"}, {"dtype": "nope"}]
    values += [{"tuple": [1]}, {"dict": {"a": 1}}, {"type": "Int8WeightOnlyConfig", "fields": {"version": "2"}}]

    def paths(node, path=()):
        yield path
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            yield from paths(child, path + (key,))

    rng = random.Random(23)
    for _ in range(1500):
        data = copy.deepcopy(rng.choice(seeds))
        for path in rng.sample([p for p in paths(data) if p], 2):
            parent = data
            try:
                for key in path[:-1]:
                    parent = parent[key]
                parent[path[-1]] = copy.deepcopy(rng.choice(values))
            except (KeyError, IndexError, TypeError):  # an earlier edit replaced the way there
                pass
        try:
            TorchAOBackendConfig.from_dict(json.loads(json.dumps(data)))
        except (ValueError, TypeError, BackendUnavailableError):
            pass
