"""`jit_config` (docs/reference/jit.md, docs/reference/api.md): the attribute, fields and defaults, the default
strategy, reset, environment, and the public names."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from jit_helpers import reset_jit

import aitune.torch as ait
from aitune.torch.jit import config as jit_config_module
from aitune.torch.jit.config import Config, JITMode


@pytest.fixture(autouse=True)
def _jit():
    reset_jit()
    yield
    reset_jit()


def test_jit_config_is_an_attribute_and_no_submodule_shadows_it():
    from aitune.torch import jit_config

    assert jit_config is jit_config_module.config and isinstance(jit_config, Config)
    assert importlib.util.find_spec("aitune.torch.jit_config") is None
    assert ait.PatchedModule.__module__ == "aitune.torch.jit.patched_module"
    assert callable(ait.patch_for_jit_tuning)
    assert [m.name for m in JITMode] == ["INSPECT", "TUNE_EAGER", "TUNE_DEFERRED"]


def test_defaults_and_reset(monkeypatch, tmp_path):
    monkeypatch.setenv("AITUNE_JIT_CACHE_DIR", str(tmp_path / "jitcache"))
    cfg = Config()
    assert (cfg.mode, cfg.dry_run, cfg.dry_run_failure_probability, cfg.device) == (
        JITMode.TUNE_EAGER,
        False,
        0.2,
        "cuda:0",
    )
    assert (cfg.min_samples, cfg.batch_axis_required, cfg.max_depth_level, cfg.min_parameters) == (1, True, 1, 0)
    assert (cfg.detect_graph_breaks, cfg.skip_modules, cfg.patch_exclude, cfg.strategy) == (False, [], (), None)
    assert cfg.cache_dir == tmp_path / "jitcache"
    cfg.mode, cfg.max_depth_level, cfg.strategy = JITMode.INSPECT, 7, object()
    cfg.skip_modules.append("X")
    monkeypatch.delenv("AITUNE_JIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cfg.reset_to_defaults()
    assert (cfg.mode, cfg.max_depth_level, cfg.strategy, cfg.skip_modules) == (JITMode.TUNE_EAGER, 1, None, [])
    assert cfg.cache_dir == tmp_path / "xdg" / "aitune.jit"


def test_default_strategy_is_first_wins_ending_with_inductor_and_gated():
    from aitune.torch.backend import TorchInductorJitBackend

    strategy = Config().resolve_strategy()
    assert type(strategy).__name__ == "FirstWinsStrategy" and strategy._performance_validation
    assert isinstance(strategy.backends[-1], TorchInductorJitBackend)
    names = [b.describe() for b in strategy.backends]
    if len(names) == 3:  # TensorRT is part of this build
        assert names[:2] == ["TensorRTBackend()", "TensorRTBackend(use_dynamo=False)"]
    else:
        assert names == ["TorchInductorJitBackend()"]
    user = ait.FirstWinsStrategy([TorchInductorJitBackend()])
    cfg = Config(strategy=user)
    assert cfg.resolve_strategy() is user

    from aitune.torch.jit.jit_tuning import jit_strategy
    from aitune.torch.jit.config import config

    config.strategy = user
    clone = jit_strategy()
    assert clone is not user and not clone._find_max_batch_size and user._find_max_batch_size


def test_invalid_values_name_the_field():
    cfg = Config(mode="tune_deferred")
    cfg.validate()
    assert cfg.mode is JITMode.TUNE_DEFERRED and isinstance(cfg.cache_dir, Path)
    with pytest.raises(
        ValueError,
        match=r"jit_config.mode must be one of \['INSPECT', 'TUNE_EAGER', 'TUNE_DEFERRED'\]"
        r", got 'fast'",
    ):
        Config(mode="fast").validate()
    with pytest.raises(ValueError, match="jit_config.max_depth_level must be an integer >= 1, got 0"):
        Config(max_depth_level=0).validate()
    with pytest.raises(ValueError, match="dry_run_failure_probability must be between 0 and 1, got 2"):
        Config(dry_run_failure_probability=2).validate()
