"""A candidate that computes the module with its last Linear layer's weights off by a relative
error (each weight times 1 + relative_error * N(0, 1)): the real error the numeric check must
refuse (docs/reference/validation.md#the-noise-bound). Used by tests/unit/task and tests/gpu."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import torch

from aitune.torch.backend.backend import Backend, BackendConfig
from aitune.torch.backend.common.jit_warmup import original_forward


@dataclasses.dataclass
class PerturbedConfig(BackendConfig):
    relative_error: float = 0.0  # relative error of the last layer's weights
    exact_last_layer: bool = False  # compute the last layer in float32 (a correct reordering)


class PerturbedBackend(Backend):
    """Serves a copy of the module whose last Linear's weights carry a relative error."""

    config_class = PerturbedConfig

    @property
    def is_jit(self) -> bool:
        return True

    def _build(
        self, module: torch.nn.Module, graph_spec: Any, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        self._copy = copy.deepcopy(module)
        self._forward = original_forward(self._copy)  # the copy's own forward, not aitune's router
        last = [m for m in self._copy.modules() if isinstance(m, torch.nn.Linear)][-1]
        self._last = last
        if self.config.relative_error:
            g = torch.Generator().manual_seed(7)
            noise = torch.randn(last.weight.shape, generator=g).to(last.weight.device, last.weight.dtype)
            with torch.no_grad():
                last.weight.mul_(1 + self.config.relative_error * noise)

    def _infer(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            if not self.config.exact_last_layer:
                return self._forward(x)
            hidden = self._copy[:-1](x)
            w, b = self._last.weight, self._last.bias
            return (hidden.float() @ w.float().T + b.float()).to(x.dtype)
