from __future__ import annotations

from typing import TYPE_CHECKING

from aitune.exceptions import NoValidBackendError
from aitune.torch.backend.backend import Backend
from aitune.torch.tune_strategy.performance_validation import PerformanceValidatedStrategy
from aitune.torch.tune_strategy.tune_strategy import GraphContext

if TYPE_CHECKING:
    import logging

    from aitune.torch.task.profiling.config import ProfilingConfig


class OneBackendStrategy(PerformanceValidatedStrategy):
    """Exactly one backend: its availability, build and correctness errors propagate; below
    the performance gate the eager baseline is served instead (docs/guide.md, "Strategies")."""

    def __init__(
        self,
        backend: Backend,
        *,
        sink: logging.Logger | None = None,
        profiling_config: ProfilingConfig | None = None,
        min_speedup_threshold_percent: float = 1.0,
    ) -> None:
        super().__init__(
            sink=sink, profiling_config=profiling_config, min_speedup_threshold_percent=min_speedup_threshold_percent
        )
        if not isinstance(backend, Backend):
            raise TypeError(f"OneBackendStrategy needs a Backend instance, got {type(backend).__name__}")
        self.backend = backend

    def candidates(self) -> list[Backend]:
        return [self.backend]

    def selection_rule(self) -> str:
        return f"{type(self).__name__}: the one configured backend, if it builds and passes the checks{self._gate_rule_text()}"

    def _describe_parts(self) -> list[str]:  # AITune's form (docs/guide.md, "Coming from AITune")
        return [
            "name: One Backend Strategy",
            "description: Use only one backend",
            f"backend: {self.backend.describe()}",
        ]

    def to_json_dict(self) -> dict[str, object]:
        return {
            "backends": [self.backend.describe()],
            "min_speedup_threshold_percent": self.min_speedup_threshold_percent,
            "profiling_config": self.profiling_config.to_json_dict(),
        }

    def _tune(self, ctx: GraphContext) -> Backend:
        backend = self._build_and_validate(self.backend, ctx, raise_on_failure=True)
        assert backend is not None  # raise_on_failure re-raises instead
        if self._passes_gate(backend, ctx):
            return backend
        backend.deactivate()
        if self._baseline_backend is not None:
            self._log(
                "ℹ️ Baseline was selected: %s did not beat eager by %.2f%%",
                backend.describe(),
                self.min_speedup_threshold_percent,
            )
            self._keep_eager_message(ctx)
            return self._baseline_backend
        raise NoValidBackendError(
            f"Backend '{backend.describe()}' failed the performance gate but no TorchEager baseline is available "
            "to fall back to."
        )
