"""The AITune-contract custom backend that wrote tests/data/checkpoints_v1/custom_torchscript.ait.

Its module and class name are part of that file (format 1 stores the class path
`checkpoint_v1_backend.V1TorchScriptBackend`, read today as the registry name
`custom:checkpoint_v1_backend.V1TorchScriptBackend`): do not rename or move it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from aitune.torch.backend import ArtifactPath, Backend, BackendConfig
from aitune.torch.backend.backend import BackendState


@dataclasses.dataclass
class V1TorchScriptConfig(BackendConfig):
    check_trace: bool = False


class V1TorchScriptBackend(Backend):
    """Traces the module with TorchScript; AITune's contract (4-argument _build, _deploy() without
    a device, its own to_dict/from_dict)."""

    def __init__(self, config: V1TorchScriptConfig | None = None):
        super().__init__()
        self._config = config or V1TorchScriptConfig()
        self._artifact: ArtifactPath | None = None
        self._program = None

    def key(self) -> str:
        return f"{self.__class__.__name__}_{self._config.key()[:12]}"

    def to_dict(self) -> dict:
        return {"artifact": self._artifact, "device": self._device, "config": dataclasses.asdict(self._config)}

    @classmethod
    def from_dict(cls, module, state_dict: dict) -> "V1TorchScriptBackend":
        backend = cls(V1TorchScriptConfig(**state_dict["config"]))
        backend._artifact = state_dict["artifact"]
        backend._device = state_dict["device"]
        backend.state = BackendState.CHECKPOINT_LOADED
        return backend

    def _build(self, module, graph_spec, data, cache_dir: Path) -> "V1TorchScriptBackend":
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
        self._activate()

    def _infer(self, *args, **kwargs):
        return self._program(*args, **kwargs)
