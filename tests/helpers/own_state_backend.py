"""A custom backend written to AITune's own-state contract (to_dict()/from_dict(), docs/guide.md
"Coming from AITune") whose state names every kind of path a checkpoint can hold: an artifact
file (a TorchScript program: code, if it came from elsewhere), an artifact folder, tensors (the
state's safetensors entry) and a plain path. For the path tests (tests/unit/checkpoint) and the
fuzzer (tests/fuzz), which import it by name so its registry name is the same everywhere."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from aitune.torch.backend import ArtifactPath, Backend, BackendConfig
from aitune.torch.backend.backend import BackendState


@dataclasses.dataclass
class OwnStateConfig(BackendConfig):
    offset: float = 0.0


class OwnStateBackend(Backend):
    """Serves a traced program plus an offset tensor kept in its state; `from_dict` records the
    ArtifactPaths it was given (`restored_paths`), so a test can check where they point."""

    restored_paths: list[Path] = []  # every ArtifactPath any from_dict received, in order
    restored_tensors: list[torch.Tensor] = []  # and every state tensor

    def __init__(self, config: OwnStateConfig | None = None):
        super().__init__()
        self._config = config or OwnStateConfig()
        self._program_file: ArtifactPath | None = None
        self._notes: ArtifactPath | None = None
        self._offset = torch.tensor([self._config.offset])
        self._program = None

    def key(self) -> str:
        return f"{self.__class__.__name__}_{self._config.key()[:12]}"

    def to_dict(self) -> dict:
        return {
            "program": self._program_file,
            "notes": self._notes,
            "offset": self._offset,
            "device": self._device,
            "built_in": Path("/opt/where-it-was-built"),
            "config": dataclasses.asdict(self._config),
        }

    @classmethod
    def from_dict(cls, module, state_dict: dict) -> OwnStateBackend:
        backend = cls(OwnStateConfig(**state_dict["config"]))
        backend._program_file = state_dict["program"]
        backend._notes = state_dict["notes"]
        backend._offset = state_dict["offset"]
        backend._device = state_dict["device"]
        cls.restored_paths.extend([backend._program_file.path, backend._notes.path])
        cls.restored_tensors.append(backend._offset)
        backend.state = BackendState.CHECKPOINT_LOADED
        return backend

    def _build(self, module, graph_spec, data, cache_dir: Path) -> OwnStateBackend:
        args, _ = data[0]
        traced = torch.jit.trace(module.to(self.device), args, check_trace=False)
        (Path(cache_dir) / "program").mkdir(exist_ok=True)
        path = Path(cache_dir) / "program" / "model.ts"
        torch.jit.save(traced, str(path))
        notes = Path(cache_dir) / "notes"
        notes.mkdir(exist_ok=True)
        (notes / "a.txt").write_text("built by OwnStateBackend\n")
        self._program_file = ArtifactPath.from_existing(path, root=cache_dir)
        self._notes = ArtifactPath.from_existing(notes, root=cache_dir)
        self._program = traced
        return self

    def _activate(self):
        self._program = torch.jit.load(str(self._program_file.path), map_location=self.device)

    def _deactivate(self):
        self._program = None

    def _deploy(self):
        self._activate()

    def _infer(self, *args, **kwargs):
        return self._program(*args, **kwargs) + self._offset.to(args[0].device)
