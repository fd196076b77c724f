"""Shared pieces of the JIT tests: tiny models whose `compute` is the pure math (what the fake
backend serves), a fake backend that fails for chosen classes, and a fixture body that leaves no
patch, head or setting behind."""

from __future__ import annotations

import atexit
import dataclasses
from pathlib import Path
from typing import Any

import torch
from fake_backend import FakeBackend, FakeBackendConfig

import aitune.torch as ait
from aitune.torch.jit import patcher, telemetry
from aitune.torch.jit.config import config as jit_config
from aitune.torch.jit.exit_report import at_exit
from aitune.torch.jit.state import runtime


class Block(torch.nn.Module):
    def __init__(self, features: int = 4) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(features, features)
        self.act = torch.nn.ReLU()

    def compute(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.lin(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.compute(x)


class Net(torch.nn.Module):
    def __init__(self, features: int = 4) -> None:
        super().__init__()
        self.a = Block(features)
        self.b = Block(features)

    def compute(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.compute(x) * scale


@dataclasses.dataclass
class SelectiveFakeConfig(FakeBackendConfig):
    fail_for: tuple[str, ...] = ()  # class names whose build fails


class SelectiveFakeBackend(FakeBackend):
    """FakeBackend whose build fails for the module classes named in `fail_for`."""

    config_class = SelectiveFakeConfig

    def _build(self, module: torch.nn.Module, graph_spec: Any, data: list, device: torch.device,
               cache_dir: Path) -> None:
        if type(module).__name__ in self.config.fail_for:
            raise RuntimeError(f"fake build failure for {type(module).__name__}")
        super()._build(module, graph_spec, data, device, cache_dir)


def fake_strategy(fail_for: tuple[str, ...] = ()) -> Any:
    return ait.FirstWinsStrategy([SelectiveFakeBackend(SelectiveFakeConfig(fail_for=fail_for))]) \
        .enable_performance_validation(False)


def reset_jit() -> None:
    """No patch of nn.Module.__init__, no heads, default jit_config, no exit hook."""
    patcher._uninstall()
    patcher._patcher.global_enabled = False
    patcher._patcher.scoped_depth = 0
    if patcher._patcher.atexit_registered:
        atexit.unregister(at_exit)
        patcher._patcher.atexit_registered = False
    runtime.reset()
    telemetry.reset()
    jit_config.reset_to_defaults()
