"""A backend written to AITune's documented contract (its tuning-workflow guide, "Custom
Backend"): `_build(module, graph_spec, data, cache_dir)` with the device in `self.device`,
`_deploy()` without arguments, its own `to_dict()` / classmethod `from_dict(module, state_dict)`
with its files as ArtifactPath. It must build, validate, pass the gate, save and load unchanged."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend import ArtifactPath, Backend, BackendConfig, BuildMode, ExecutionMode
from aitune.torch.backend.backend import BackendState
from aitune.torch.module.wrapper_module import ModuleState
from aitune.torch.tune_strategy import OneBackendStrategy


@dataclasses.dataclass
class TorchScriptBackendConfig(BackendConfig):
    check_trace: bool = False


class TorchScriptBackend(Backend):
    """Traces the module with TorchScript and serves the traced program, as a user would write
    it for AITune 0.6 (the class attributes AITune 0.6 requires included)."""

    _devices = ["cpu", "cuda"]
    _execution_modes = frozenset({ExecutionMode.SINGLE_GPU})
    _build_mode = BuildMode.AHEAD_OF_TIME

    def __init__(self, config: TorchScriptBackendConfig | None = None):
        super().__init__()
        self._config = config or TorchScriptBackendConfig()
        self._artifact: ArtifactPath | None = None
        self._program = None
        self.deployed_on = None

    def key(self) -> str:
        return f"{self.__class__.__name__}_{self._config.key()[:12]}"

    def describe(self) -> str:
        return f"{self.__class__.__name__}({self._config.describe()})"

    @property
    def is_jit(self) -> bool:
        return False

    def to_dict(self) -> dict:
        return {
            "type": self.__class__.__name__,
            "artifact": self._artifact,
            "device": self._device,
            "config": dataclasses.asdict(self._config),
            "dtype": torch.float32,
        }

    @classmethod
    def from_dict(cls, module, state_dict: dict) -> "TorchScriptBackend":
        assert state_dict["type"] == cls.__name__
        backend = cls(TorchScriptBackendConfig(**state_dict["config"]))
        backend._artifact = state_dict["artifact"]
        backend._device = state_dict["device"]
        backend.state = BackendState.CHECKPOINT_LOADED
        return backend

    def _build(self, module, graph_spec, data, cache_dir: Path) -> "TorchScriptBackend":
        args, kwargs = data[0]
        traced = torch.jit.trace(module.to(self.device), args, check_trace=self._config.check_trace)
        path = Path(cache_dir) / "model.ts"
        torch.jit.save(traced, str(path))
        self._artifact = ArtifactPath.from_existing(path, root=cache_dir)
        self._program = traced
        return self

    def _activate(self):
        self._program = torch.jit.load(str(self._artifact.path), map_location=self.device)

    def _deactivate(self):
        self._program = None

    def _deploy(self):
        self.deployed_on = self.device
        self._activate()

    def _infer(self, *args, **kwargs):
        return self._program(*args, **kwargs)


class SmallNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

    def forward(self, x):
        return self.body(x)


def _strategy() -> OneBackendStrategy:
    # The gate would compare TorchScript with eager on a CPU where either may win by noise.
    return OneBackendStrategy(TorchScriptBackend()).enable_performance_validation(False)


def test_aitune_contract_is_detected_once_per_class() -> None:
    contract = TorchScriptBackend._contract
    assert not contract.build_takes_device and not contract.deploy_takes_device and contract.own_state
    from aitune.torch.backend import TorchEagerBackend

    assert TorchEagerBackend._contract.build_takes_device and not TorchEagerBackend._contract.own_state


def test_custom_backend_builds_validates_saves_and_loads(tmp_path) -> None:
    torch.manual_seed(0)
    model = SmallNet().eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        expected = model(x)
    weights = {k: v.clone() for k, v in model.state_dict().items()}  # tuning releases them (meta)
    module = ait.Module(model, "custom-backend-net", strategy=_strategy())
    ait.tune(module, [torch.randn(8) for _ in range(4)], batch_sizes=[1, 2], device="cpu")

    assert module.state is ModuleState.TUNED
    backend = module.tuned_module.backends[0][1]
    assert isinstance(backend, TorchScriptBackend) and backend.device == torch.device("cpu")
    assert backend._artifact.path.is_file()
    with torch.no_grad():
        torch.testing.assert_close(module(x), expected)

    path = ait.save(module, tmp_path / "custom.ait")
    manifest_text = json.loads(_manifest(path))["modules"][0]["graphs"][0]["backend"]
    assert manifest_text["own_state"] is True and (manifest_text.get("name") or manifest_text["class"]).endswith(
        "TorchScriptBackend"
    )

    fresh = SmallNet().eval()
    fresh.load_state_dict(weights)
    loaded = ait.load(fresh, tmp_path / "custom.ait")
    restored = loaded.tuned_module.backends[0][1]
    assert isinstance(restored, TorchScriptBackend)
    assert restored.state is BackendState.DEPLOYED and restored.deployed_on == torch.device("cpu")
    # from_dict got its file back as an ArtifactPath inside the extracted checkpoint.
    assert restored._artifact.path.is_file() and restored._artifact.relative_path == Path("model.ts")
    assert restored._artifact.path != backend._artifact.path
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), expected)


def test_custom_backend_state_that_cannot_be_stored_names_the_value(tmp_path) -> None:
    class Opaque:
        pass

    class OpaqueStateBackend(TorchScriptBackend):
        def to_dict(self) -> dict:
            return {**super().to_dict(), "handle": Opaque()}

    model = SmallNet().eval()
    module = ait.Module(
        model, "opaque-state", strategy=OneBackendStrategy(OpaqueStateBackend()).enable_performance_validation(False)
    )
    ait.tune(module, [torch.randn(8) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    assert module.state is ModuleState.TUNED
    with pytest.raises(ValueError, match=r"OpaqueStateBackend.to_dict\(\)\['handle'\].*Opaque"):
        ait.save(module, tmp_path / "opaque.ait")


def _manifest(path: Path) -> str:
    from aitune._native import _C

    return _C.ArchiveReader(str(path)).manifest()
