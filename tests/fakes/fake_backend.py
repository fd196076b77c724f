"""A fake backend for strategy tests (allowed by the project's testing rules): it serves the
test model's pure computation with a configurable build failure, output error, NaN and
per-call latency, so every strategy outcome can be produced on a CPU."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import torch

from aitune.exceptions import TuningBudgetExceeded
from aitune.torch.backend.backend import Backend, BackendConfig, ServingPlan
from aitune.torch.backend.common.cuda_graphs import CudaGraphs
from aitune.torch.utils.progress import current_text


class SleepyLinear(torch.nn.Module):
    """Eager forward = `delay_s` of sleep + a linear layer; `compute` is the math alone."""

    def __init__(self, delay_s: float = 0.002, features: int = 8) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.linear = torch.nn.Linear(features, features)

    def compute(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.delay_s)
        return self.compute(x)


@dataclasses.dataclass
class FakeBackendConfig(BackendConfig):
    name: str = "fake"
    fail_build: bool = False
    unavailable_reason: str = ""
    delay_s: float = 0.0
    output_scale: float = 1.0
    output_offset: float = 0.0
    produce_nan: bool = False
    precision: str = "fp32"
    batch_delays_s: tuple = ()  # ((batch size, delay), ...): per-call delay by batch size, over delay_s
    graph_delay_s: float = 0.0  # per-call delay when served "through CUDA graphs"
    capture_fails: bool = False  # the "CUDA-graph capture" of every call fails
    oom_after_calls: int = 0  # every call after this many raises torch.OutOfMemoryError (0: never)
    # Stands in for an ahead-of-time backend (is_jit False: built for the graph's max shapes, so a
    # FirstWins max-batch search runs before it); it still serves the module's weights, so tests
    # that use it keep the module on its device (config.device_after_tuning).
    ahead_of_time: bool = False
    use_cuda_graphs: bool = False
    build_delay_s: float = 0.0  # how long _build takes (a sleep, so a tuning budget's deadline interrupts it)
    build_cost: float = 1.0  # expected_build_cost(): the order and skips under a tuning budget
    # ((batch size, delay), ...): the first call at that batch size sleeps this long, as a JIT
    # backend compiles a shape the first time it meets it (in the checks or the measurement).
    first_call_delays_s: tuple = ()
    # A compiler that turns the budget's interrupt into an error of its own (as Dynamo may).
    interrupt_as_runtime_error: bool = False


class FakeGraphServing:
    """Stands in for the native CUDA-graph runner on a CPU (strategy tests only): serves the
    backend with its graph delay and can report a failed capture, as the real runner does
    (`capture_failures` in its stats and a warning)."""

    def __init__(self, backend: FakeBackend) -> None:
        self._backend = backend

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self._backend._compute(x, self._backend.config.graph_delay_s)

    def capture_failure(self) -> str | None:
        if self._backend.config.capture_fails:
            return "capture of input signature [8] failed: operation not permitted when stream is capturing"
        return None

    def plan(self) -> ServingPlan:
        return ServingPlan(self)  # served from Python

    def stats(self) -> dict[str, int]:
        return {"capture_failures": int(self._backend.config.capture_fails)}


class FakeCudaGraphs(CudaGraphs):
    """The backend's CUDA-graph serving through FakeGraphServing, on any device."""

    def check_device(self, device: torch.device) -> None:
        pass  # FakeGraphServing runs on the CPU

    def start(self) -> None:
        self.serving = FakeGraphServing(self._backend) if self._backend.config.use_cuda_graphs else None


class FakeBackend(Backend):
    config_class = FakeBackendConfig
    _cuda_graphs_class = FakeCudaGraphs
    builds: list[str] = []  # describe() of every _build call, for tests that count builds
    progress: list[str | None] = []  # the live progress line's text at each _build call

    def __init__(self, config: FakeBackendConfig | None = None, *, tolerance: Any = None) -> None:
        super().__init__(config, tolerance=tolerance)
        self._module: Any = None
        self.calls = 0
        self._sizes_seen: set[int] = set()

    @property
    def precision_class(self) -> str:
        return self.config.precision

    @property
    def is_jit(self) -> bool:
        return not self.config.ahead_of_time  # it serves the original module's weights, which must stay in place

    def is_available(self) -> tuple[bool, str]:
        return (not self.config.unavailable_reason, self.config.unavailable_reason)

    def expected_build_cost(self) -> float:
        return self.config.build_cost

    def _build(
        self, module: torch.nn.Module, graph_spec: Any, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        FakeBackend.builds.append(self.describe())
        FakeBackend.progress.append(current_text())
        if self.config.build_delay_s:
            time.sleep(self.config.build_delay_s)
        if self.config.fail_build:
            print("fake backend: the build fails as configured")  # goes to build.log
            raise RuntimeError(f"fake build failure ({self.config.name})")
        self._module = module

    def _infer(self, x: torch.Tensor) -> torch.Tensor:
        return self._compute(x, dict(self.config.batch_delays_s).get(x.shape[0], self.config.delay_s))

    def _compute(self, x: torch.Tensor, delay_s: float) -> torch.Tensor:
        self.calls += 1
        if x.shape[0] not in self._sizes_seen:
            self._sizes_seen.add(x.shape[0])
            try:
                time.sleep(dict(self.config.first_call_delays_s).get(x.shape[0], 0.0))
            except TuningBudgetExceeded as e:
                if self.config.interrupt_as_runtime_error:
                    raise RuntimeError("fake compiler: compilation interrupted") from e
                raise
        if self.config.oom_after_calls and self.calls > self.config.oom_after_calls:
            raise torch.OutOfMemoryError(f"fake: out of memory at call {self.calls}")
        if delay_s:
            time.sleep(delay_s)
        with torch.no_grad():
            y = self._module.compute(x) * self.config.output_scale + self.config.output_offset
        if self.config.produce_nan:
            y = y.clone()
            y.view(-1)[0] = float("nan")
        return y
