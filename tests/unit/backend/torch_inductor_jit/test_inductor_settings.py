"""Inductor settings as config fields of the Inductor backends (`freezing`,
`coordinate_descent_tuning`, and `max_autotune` on the AOT config): validation, identity, what
Inductor gets, and a real CPU compile with freezing (docs/reference/backends.md#inductor-settings)."""

from __future__ import annotations

import copy
import os

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend import (
    TorchInductorAotBackend,
    TorchInductorAotBackendConfig,
    TorchInductorJitBackend,
    TorchInductorJitBackendConfig,
)
from aitune.torch.backend.backend import sibling_key
from aitune.torch.module.state import ModuleState


def _strategy(backend):
    return ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)


class ConvBn(torch.nn.Module):
    """Conv + batch norm: what freezing folds (the batch norm into the conv's weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.head(y.mean(dim=(2, 3)))


def _conv_bn() -> torch.nn.Module:
    torch.manual_seed(0)
    model = ConvBn().eval()
    with torch.no_grad():  # non-trivial running statistics, so the folding changes the weights
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model


# -- configs ----------------------------------------------------------------------------------------
def test_settings_fields_default_off_and_keep_aitune_positional_order():
    config = TorchInductorJitBackendConfig(False, None, "default")
    assert config.mode == "default" and config.freezing is False and config.coordinate_descent_tuning is False
    assert config.inductor_options() is None  # torch.compile's own default
    assert TorchInductorAotBackendConfig().merged_inductor_configs() == {}


def test_settings_fields_reach_inductor_options_merged_with_the_users():
    config = TorchInductorJitBackendConfig(freezing=True, coordinate_descent_tuning=True)
    assert config.inductor_options() == {"freezing": True, "coordinate_descent_tuning": True}
    user = TorchInductorJitBackendConfig(options={"epilogue_fusion": False}, freezing=True)
    assert user.inductor_options() == {"epilogue_fusion": False, "freezing": True}
    assert user.options == {"epilogue_fusion": False}  # the user's dict is not changed
    # max-autotune comes through the mode; the mode's settings are what torch applies for it.
    tuned = TorchInductorJitBackendConfig(mode="max-autotune-no-cudagraphs", freezing=True, use_cuda_graphs=True)
    assert tuned.inductor_options() == {"freezing": True}
    assert tuned.mode_settings()["max_autotune"] is True
    aot = TorchInductorAotBackendConfig(inductor_configs={"epilogue_fusion": False}, max_autotune=True, freezing=True)
    assert aot.merged_inductor_configs() == {"epilogue_fusion": False, "max_autotune": True, "freezing": True}


def test_settings_fields_are_checked():
    with pytest.raises(ValueError, match=r"TorchInductorJitBackendConfig.freezing must be a bool, got 'yes'"):
        TorchInductorJitBackendConfig(freezing="yes")
    with pytest.raises(ValueError, match=r"freezing=True conflicts with options\['freezing'\]=False"):
        TorchInductorJitBackendConfig(options={"freezing": False}, freezing=True)
    with pytest.raises(ValueError, match=r"max_autotune=True conflicts with inductor_configs\['max_autotune'\]=0"):
        TorchInductorAotBackendConfig(inductor_configs={"max_autotune": 0}, max_autotune=True)
    # The same value in both places is one setting, not a conflict.
    TorchInductorJitBackendConfig(options={"freezing": True}, freezing=True)
    # A saved config (a file) with a wrong type is refused like every other scalar field.
    with pytest.raises(TypeError, match="coordinate_descent_tuning must be bool"):
        TorchInductorJitBackendConfig.from_dict({"coordinate_descent_tuning": "1"})


def test_settings_fields_are_part_of_identity_and_round_trip():
    plain = TorchInductorJitBackend(TorchInductorJitBackendConfig(use_cuda_graphs=True))
    frozen = TorchInductorJitBackend(TorchInductorJitBackendConfig(use_cuda_graphs=True, freezing=True))
    assert frozen.describe() == "TorchInductorJitBackend(use_cuda_graphs=True, freezing=True)"
    assert frozen.key() != plain.key()
    assert sibling_key(frozen) != sibling_key(plain)  # a different build, not a serving variant
    for config in (
        frozen.config,
        TorchInductorJitBackendConfig(mode="max-autotune-no-cudagraphs", coordinate_descent_tuning=True),
        TorchInductorAotBackendConfig(max_autotune=True, freezing=True, use_cuda_graphs=True),
    ):
        assert type(config).from_dict(config.to_dict()) == config
    # A config saved before these fields existed loads with them off.
    old = {k: v for k, v in plain.config.to_dict().items() if k not in ("freezing", "coordinate_descent_tuning")}
    assert TorchInductorJitBackendConfig.from_dict(old) == plain.config
    aot = TorchInductorAotBackend(TorchInductorAotBackendConfig(max_autotune=True))
    assert aot.describe() == "TorchInductorAotBackend(max_autotune=True)"
    assert aot.key() != TorchInductorAotBackend().key()


# -- a real compile ---------------------------------------------------------------------------------
def test_freezing_build_serves_correctly_and_leaves_the_weights_alone():
    model = _conv_bn()
    reference = copy.deepcopy(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    m = ait.Module(
        model, "convbn", strategy=_strategy(TorchInductorJitBackend(TorchInductorJitBackendConfig(freezing=True)))
    )
    g = torch.Generator().manual_seed(1)
    ait.tune(m, [torch.randn(3, 8, 8, generator=g) for _ in range(3)], batch_sizes=[1, 2], device="cpu")
    assert m.state is ModuleState.TUNED
    [(_, backend)] = m.tuned_module.backends
    assert backend.config.freezing is True
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        served = m(x)
        torch.testing.assert_close(served, reference(x), atol=1e-5, rtol=1e-5)
    # state_dict() is what the user had: same keys, same values (freezing_discard_parameters off).
    after = backend._module.state_dict()
    assert after.keys() == before.keys()
    for key, value in before.items():
        torch.testing.assert_close(after[key], value, atol=0, rtol=0)
    # Freezing folded the batch norm into the convolution's weights (a new constant of the compiled
    # graph): changing the batch norm's statistics now does not change what the compiled forward
    # computes, while eager sees it (the documented caveat of freezing, and proof it was applied).
    with torch.no_grad():
        backend._module.bn.running_mean.add_(1.0)
        torch.testing.assert_close(m(x), served, atol=1e-6, rtol=1e-6)
        assert not torch.allclose(backend._forward(x), served, atol=1e-3)  # the original forward, not the router


# -- compiler caches --------------------------------------------------------------------------------
def test_inductor_caches_go_to_aitunes_cache_folder_unless_one_was_chosen(monkeypatch, tmp_path):
    from aitune.torch.backend.common.compile_caches import INDUCTOR_CACHE_ENV, keep_compile_caches_in_aitune
    from aitune.torch.config import config

    monkeypatch.setenv(INDUCTOR_CACHE_ENV, "placeholder")  # so that teardown restores the session's value
    monkeypatch.delenv(INDUCTOR_CACHE_ENV)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    m = ait.Module(model, "mlp", strategy=_strategy(TorchInductorJitBackend()))
    ait.tune(m, [torch.randn(4) for _ in range(2)], batch_sizes=[1], device="cpu")
    folder = config.cache_dir / "torch" / "inductor"
    assert os.environ[INDUCTOR_CACHE_ENV] == str(folder)
    assert any((folder / "fxgraph").rglob("*")), "Inductor wrote its FX-graph cache there"
    # A folder chosen before (by the user, or by torch itself) is kept.
    chosen = tmp_path / "mine"
    monkeypatch.setenv(INDUCTOR_CACHE_ENV, str(chosen))
    assert keep_compile_caches_in_aitune() is None
    assert os.environ[INDUCTOR_CACHE_ENV] == str(chosen)
