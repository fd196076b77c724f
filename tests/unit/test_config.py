"""Behaviour of aitune.torch.config and aitune.torch.utils.env (docs/reference/configuration.md,
docs/reference/tuning.md#the-tune-call step 2)."""

import importlib
import json
import os
import re
from pathlib import Path

import pytest
import torch

from aitune.exceptions import AITuneUserInputError
from aitune.torch.config import (
    DEFAULT_DEVICE,
    AITuneConfig,
    AITuneMode,
    aitune_cache_dir,
    config,
    normalize_device,
)
from aitune.torch.utils.env import env_bool, env_int, env_str

# `aitune.torch.config` is the config *instance* as an attribute of aitune.torch
# (docs/reference/api.md#top-level-names), so the submodule is taken from the import system.
config_module = importlib.import_module("aitune.torch.config")

_ENV_VARS = [
    "AITUNE_CACHE_DIR",
    "XDG_CACHE_HOME",
    "AITUNE_TUNING_DATA_PATH",
    "AITUNE_TUNING_REPORT_PATH",
    "AITUNE_TRANSFORMERS_INTEGRATION",
    "AITUNE_DIFFUSERS_INTEGRATION",
    "AITUNE_CUDA_GRAPH_CACHE_SIZE",
    "AITUNE_REUSE_TUNING_RESULTS",
]


@pytest.fixture(autouse=True)
def _restore_global_config():
    """Reset the singleton after monkeypatch has restored the environment."""
    yield
    config.reset_to_defaults()


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


# -- env helpers ---------------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "true", "True", "yes", "Yes", "YES"])
def test_env_bool_true_spellings(monkeypatch, value):
    monkeypatch.setenv("AITUNE_TEST_FLAG", value)
    assert env_bool("AITUNE_TEST_FLAG", False) is True


@pytest.mark.parametrize("value", ["0", "TRUE", "on", "y", "", "false", " 1"])
def test_env_bool_other_values_are_false(monkeypatch, value):
    monkeypatch.setenv("AITUNE_TEST_FLAG", value)
    assert env_bool("AITUNE_TEST_FLAG", True) is False


def test_env_bool_unset_uses_default(monkeypatch):
    monkeypatch.delenv("AITUNE_TEST_FLAG", raising=False)
    assert env_bool("AITUNE_TEST_FLAG", True) is True
    assert env_bool("AITUNE_TEST_FLAG", False) is False


def test_env_int(monkeypatch):
    monkeypatch.delenv("AITUNE_TEST_INT", raising=False)
    assert env_int("AITUNE_TEST_INT", 8) == 8
    monkeypatch.setenv("AITUNE_TEST_INT", " 16 ")
    assert env_int("AITUNE_TEST_INT", 8) == 16
    monkeypatch.setenv("AITUNE_TEST_INT", "")
    assert env_int("AITUNE_TEST_INT", 8) == 8
    monkeypatch.setenv("AITUNE_TEST_INT", "lots")
    with pytest.raises(AITuneUserInputError, match="AITUNE_TEST_INT.*'lots'"):
        env_int("AITUNE_TEST_INT", 8)


def test_env_str(monkeypatch):
    monkeypatch.delenv("AITUNE_TEST_STR", raising=False)
    assert env_str("AITUNE_TEST_STR", "d") == "d"
    monkeypatch.setenv("AITUNE_TEST_STR", "")
    assert env_str("AITUNE_TEST_STR", "d") == "d"
    monkeypatch.setenv("AITUNE_TEST_STR", "value")
    assert env_str("AITUNE_TEST_STR", "d") == "value"


# -- defaults and environment ------------------------------------------------------


def test_defaults(clean_env, tmp_path):
    cfg = AITuneConfig()
    cache = tmp_path / "home" / ".cache" / "aitune"
    assert cfg.cache_dir == cache
    assert cfg.min_num_samples == 100
    assert cfg.max_num_samples_stored == 1
    assert cfg.device_after_tuning == "meta"
    assert cfg.strict_mode is True
    assert cfg.tuning_data_output_path == cache / "tuning_data" / "report.json"
    assert cfg.tuning_report_path == cache / "tuning_data" / "report.html"
    assert cfg.enable_transformers_integration is True
    assert cfg.enable_diffusers_integration is False
    assert cfg.fallback_policy == "raise"
    assert cfg.cuda_graph_cache_size == 8
    assert cfg.cuda_graph_clone_outputs is True
    assert cfg.reuse_tuning_results is True
    assert cfg.mode is AITuneMode.DECLARATIVE
    assert DEFAULT_DEVICE == "cuda:0"


def test_xdg_cache_home(clean_env, tmp_path):
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert AITuneConfig().cache_dir == tmp_path / "xdg" / "aitune"


def test_env_overrides_via_reset(clean_env, tmp_path):
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    clean_env.setenv("AITUNE_CACHE_DIR", str(tmp_path / "cache"))
    clean_env.setenv("AITUNE_TUNING_DATA_PATH", str(tmp_path / "t.json"))
    clean_env.setenv("AITUNE_TUNING_REPORT_PATH", str(tmp_path / "r.html"))
    clean_env.setenv("AITUNE_TRANSFORMERS_INTEGRATION", "0")
    clean_env.setenv("AITUNE_DIFFUSERS_INTEGRATION", "yes")
    clean_env.setenv("AITUNE_CUDA_GRAPH_CACHE_SIZE", "3")
    clean_env.setenv("AITUNE_REUSE_TUNING_RESULTS", "false")
    config.reset_to_defaults()
    assert config.cache_dir == tmp_path / "cache"
    assert aitune_cache_dir() == tmp_path / "cache"
    assert config.tuning_data_output_path == tmp_path / "t.json"
    assert config.tuning_report_path == tmp_path / "r.html"
    assert config.enable_transformers_integration is False
    assert config.enable_diffusers_integration is True
    assert config.cuda_graph_cache_size == 3
    assert config.reuse_tuning_results is False


def test_report_path_follows_env_telemetry_path(clean_env, tmp_path):
    clean_env.setenv("AITUNE_TUNING_DATA_PATH", str(tmp_path / "run" / "data.json"))
    assert AITuneConfig().tuning_report_path == tmp_path / "run" / "data.html"


def test_reset_discards_assignments(clean_env, tmp_path):
    cfg = AITuneConfig()
    cfg.cache_dir = tmp_path / "elsewhere"
    cfg.strict_mode = False
    cfg.fallback_policy = "eager"
    cfg.reset_to_defaults()
    assert cfg.cache_dir == tmp_path / "home" / ".cache" / "aitune"
    assert cfg.strict_mode is True
    assert cfg.fallback_policy == "raise"


def test_invalid_env_cache_size_is_rejected(clean_env):
    clean_env.setenv("AITUNE_CUDA_GRAPH_CACHE_SIZE", "0")
    with pytest.raises(ValueError, match="cuda_graph_cache_size"):
        AITuneConfig()


# -- cache_dir relocation -----------------------------------------------------------


def test_cache_dir_setter_relocates_derived_paths(clean_env, tmp_path):
    config.reset_to_defaults()
    config.cache_dir = str(tmp_path / "moved")
    assert isinstance(config.cache_dir, Path)
    assert aitune_cache_dir() == tmp_path / "moved"
    assert config.tuning_data_output_path == tmp_path / "moved" / "tuning_data" / "report.json"
    assert config.tuning_report_path == tmp_path / "moved" / "tuning_data" / "report.html"


def test_explicit_telemetry_path_is_not_relocated(clean_env, tmp_path):
    cfg = AITuneConfig()
    cfg.tuning_data_output_path = tmp_path / "fixed.json"
    cfg.cache_dir = tmp_path / "moved"
    assert cfg.tuning_data_output_path == tmp_path / "fixed.json"
    assert cfg.tuning_report_path == tmp_path / "fixed.html"
    cfg.tuning_data_output_path = None
    assert cfg.tuning_data_output_path == tmp_path / "moved" / "tuning_data" / "report.json"


# -- validation ----------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2"])
def test_min_num_samples_validation(value):
    with pytest.raises(ValueError, match="min_num_samples"):
        AITuneConfig().min_num_samples = value


def test_min_num_samples_accepts_one():
    cfg = AITuneConfig()
    cfg.min_num_samples = 1
    assert cfg.min_num_samples == 1


@pytest.mark.parametrize("value", [0, -3, 2.0, float("-inf"), float("nan"), "inf", None])
def test_max_num_samples_stored_validation(value):
    with pytest.raises(ValueError, match="max_num_samples_stored.*" + re.escape(repr(value))):
        AITuneConfig().max_num_samples_stored = value


@pytest.mark.parametrize("value", [1, 5, float("inf")])
def test_max_num_samples_stored_accepts(value):
    cfg = AITuneConfig()
    cfg.max_num_samples_stored = value
    assert cfg.max_num_samples_stored == value


def test_fallback_policy_validation():
    cfg = AITuneConfig()
    cfg.fallback_policy = "eager"
    assert cfg.fallback_policy == "eager"
    with pytest.raises(ValueError, match="'ignore'"):
        cfg.fallback_policy = "ignore"
    assert cfg.fallback_policy == "eager"


@pytest.mark.parametrize("value", [0, -1, 2.5])
def test_cuda_graph_cache_size_validation(value):
    with pytest.raises(ValueError, match="cuda_graph_cache_size"):
        AITuneConfig().cuda_graph_cache_size = value


def test_mode_accepts_enum_and_name():
    cfg = AITuneConfig()
    cfg.mode = "JIT"
    assert cfg.mode is AITuneMode.JIT
    cfg.mode = AITuneMode.DECLARATIVE
    assert cfg.mode is AITuneMode.DECLARATIVE
    with pytest.raises(ValueError, match="'eager'"):
        cfg.mode = "eager"


def test_device_after_tuning_is_normalized():
    cfg = AITuneConfig()
    cfg.device_after_tuning = torch.device("cpu")
    assert cfg.device_after_tuning == "cpu"
    cfg.device_after_tuning = "cuda"
    assert cfg.device_after_tuning == "cuda:0"
    with pytest.raises(AITuneUserInputError):
        cfg.device_after_tuning = "tpu"


# -- to_dict ------------------------------------------------------------------


def test_to_dict_is_json_and_reflects_values(clean_env, tmp_path):
    cfg = AITuneConfig()
    cfg.cache_dir = tmp_path / "c"
    cfg.max_num_samples_stored = float("inf")
    cfg.mode = AITuneMode.JIT
    snapshot = json.loads(json.dumps(cfg.to_dict(), allow_nan=False))
    assert snapshot["cache_dir"] == str(tmp_path / "c")
    assert snapshot["tuning_data_output_path"] == str(tmp_path / "c" / "tuning_data" / "report.json")
    assert snapshot["tuning_report_path"] == str(tmp_path / "c" / "tuning_data" / "report.html")
    assert snapshot["max_num_samples_stored"] == "inf"
    assert snapshot["mode"] == "JIT"
    assert snapshot["fallback_policy"] == "raise"
    assert snapshot["cuda_graph_cache_size"] == 8
    assert set(snapshot) >= {
        "min_num_samples",
        "device_after_tuning",
        "strict_mode",
        "enable_transformers_integration",
        "enable_diffusers_integration",
        "cuda_graph_clone_outputs",
        "reuse_tuning_results",
    }


def test_module_singleton():
    assert isinstance(config_module.config, AITuneConfig)
    assert config_module.aitune_cache_dir() is config_module.config.cache_dir


# -- normalize_device -----------------------------------------------------------


@pytest.mark.parametrize(
    "device, expected",
    [
        ("cuda", "cuda:0"),
        ("cuda:0", "cuda:0"),
        ("cuda:3", "cuda:3"),
        ("cuda:127", "cuda:127"),
        ("cpu", "cpu"),
        ("meta", "meta"),
        (torch.device("cuda"), "cuda:0"),
        (torch.device("cuda", 2), "cuda:2"),
        (torch.device("cpu"), "cpu"),
        (torch.device("meta"), "meta"),
    ],
)
def test_normalize_device_accepts(device, expected):
    assert normalize_device(device) == expected


@pytest.mark.parametrize("device", ["cuda:128", "cuda:-1", "gpu", "CUDA", "cuda:", "xpu:0", "", 0, None])
def test_normalize_device_rejects(device):
    with pytest.raises(AITuneUserInputError) as info:
        normalize_device(device)
    assert repr(device) in str(info.value)
    assert "cuda:N" in str(info.value) and "'meta'" in str(info.value)


def test_normalize_device_rejects_out_of_range_torch_index():
    # torch keeps the index in 8 bits: index 200 reads back as -56 and must not pass.
    with pytest.raises(AITuneUserInputError, match="Invalid device 'cuda:"):
        normalize_device(torch.device("cuda", 200))


def test_env_is_not_read_at_access_time(clean_env, tmp_path):
    cfg = AITuneConfig()
    before = cfg.cache_dir
    os.environ["AITUNE_CACHE_DIR"] = str(tmp_path / "late")
    try:
        assert cfg.cache_dir == before
    finally:
        del os.environ["AITUNE_CACHE_DIR"]
