"""Traces the graph's module with TorchScript; the traced program is its artefact, loaded back
from a checkpoint without the module (restores_from_artifacts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from aitune.torch.backend.backend import ArtifactPath, Backend
from aitune.torch.backend.registry import register_backend
from plugin_trace.plugin_trace_config import PluginTraceBackendConfig


@register_backend("plugin_trace")
class PluginTraceBackend(Backend):
    config_class = PluginTraceBackendConfig
    restores_from_artifacts = True

    def __init__(self, config: PluginTraceBackendConfig | None = None, *, tolerance: Any = None) -> None:
        super().__init__(config, tolerance=tolerance)
        self._program: Any = None
        self._file: ArtifactPath | None = None
        self.restored = False  # True when _restore loaded it (tests tell a restore from a rebuild)

    def _build(
        self, module: torch.nn.Module, graph_spec: Any, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        sample = data[0]
        traced = torch.jit.trace(module.to(device), sample.args, check_trace=self.config.check_trace)
        path = Path(cache_dir) / "model.ts"
        torch.jit.save(traced, str(path))
        self._file = ArtifactPath.from_existing(path, cache_dir)
        self._program = traced

    def _artifacts(self) -> dict[str, Any]:
        return {"program": self._file}

    def _restore(self, artifacts: dict[str, Path], graph: Any, device: torch.device) -> None:
        path = Path(artifacts["program"])
        self._file = ArtifactPath.from_existing(path, path.parent)
        self._program = torch.jit.load(str(path), map_location=device)
        self.restored = True

    def _infer(self, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            return self._program(*args, **kwargs)
