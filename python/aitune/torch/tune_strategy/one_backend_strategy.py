from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from aitune.torch.backend.backend import Backend
from aitune.torch.module.graph_spec import GraphSpec, Sample
from aitune.torch.tune_strategy.tune_strategy import TuneStrategy


class OneBackendStrategy(TuneStrategy):
    """Builds and checks exactly one backend; its build and correctness errors propagate
    (SPEC §6.2)."""

    def __init__(self, backend: Backend, *, sink: Any = None, profiling_config: Any = None,
                 min_speedup_threshold_percent: float = 1.0) -> None:
        super().__init__(sink=sink, profiling_config=profiling_config)
        if not isinstance(backend, Backend):
            raise TypeError(f"OneBackendStrategy needs a Backend instance, got {type(backend).__name__}")
        self.backend = backend
        self.min_speedup_threshold_percent = min_speedup_threshold_percent

    def _describe_parts(self) -> list[str]:
        return [f"backend={self.backend.describe()}"]

    def to_json_dict(self) -> dict[str, Any]:
        return {"backends": [self.backend.describe()],
                "min_speedup_threshold_percent": self.min_speedup_threshold_percent}

    def _tune(self, module: torch.nn.Module, module_name: str, graph: GraphSpec, data: list[Sample],
              device: torch.device, cache_dir: Path) -> Backend:
        backend = self._build_and_validate(self.backend, module, module_name, graph, data, device, cache_dir,
                                           raise_on_failure=True)
        assert backend is not None  # raise_on_failure=True re-raises instead
        return backend
