"""When to stop measuring one batch size (docs/reference/measurement.md#one-measured-call). aitune's measurement loop
applies these rules in the C++ core (`to_native()`); `should_stop` / `get_events` apply the same rule to
AITune-style event lists, for custom strategies written against AITune (docs/guide.md, "Coming
from AITune"). Invalid settings raise InvalidValueError (a ValueError) when constructed."""

from __future__ import annotations

import abc
import dataclasses
import math

from aitune.exceptions import InvalidValueError
from aitune.torch.task.profiling.events import ProfilingResultEvent


def _positive_int(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidValueError(f"{owner}: {name} must be a positive integer, got {value!r}")


class MeasuringStopStrategy(abc.ABC):
    @abc.abstractmethod
    def should_stop(self, results: list[ProfilingResultEvent]) -> bool:
        """Called with each new batch of events; True once enough were collected."""

    @abc.abstractmethod
    def get_events(self, results: list[ProfilingResultEvent]) -> list[ProfilingResultEvent]:
        """The events the statistics use, once should_stop() said True."""

    @abc.abstractmethod
    def to_native(self) -> dict[str, int | float | str | None]:
        """The rule in the form the C++ measurement loop takes."""


@dataclasses.dataclass
class NumStepsMeasuringStopStrategy(MeasuringStopStrategy):
    """`warmup_samples` unmeasured calls, then `num_steps` measured ones."""

    num_steps: int = 20
    warmup_samples: int = 10

    def __post_init__(self) -> None:
        _positive_int(type(self).__name__, "num_steps", self.num_steps)
        _positive_int(type(self).__name__, "warmup_samples", self.warmup_samples)
        self._seen = 0  # not a field: to_json_dict and equality see the settings only

    def should_stop(self, results: list[ProfilingResultEvent]) -> bool:
        self._seen += len(results)
        return self._seen >= self.warmup_samples + self.num_steps

    def get_events(self, results: list[ProfilingResultEvent]) -> list[ProfilingResultEvent]:
        return results[-self.num_steps :]

    def to_native(self) -> dict[str, int | float | str | None]:
        return {"kind": "fixed", "num_steps": self.num_steps, "warmup_samples": self.warmup_samples}


@dataclasses.dataclass
class StableWindowMeasuringStopStrategy(MeasuringStopStrategy):
    """After `warmup_samples`, stop once the last `window_size` calls vary by a coefficient of
    variation ≤ `max_cv_ratio`; after `max_samples` measured calls without that, RuntimeError."""

    window_size: int = 20
    max_cv_ratio: float = 0.10
    warmup_samples: int = 10
    max_samples: int = 100

    def __post_init__(self) -> None:
        owner = type(self).__name__
        _positive_int(owner, "window_size", self.window_size)
        _positive_int(owner, "warmup_samples", self.warmup_samples)
        _positive_int(owner, "max_samples", self.max_samples)
        if (
            isinstance(self.max_cv_ratio, bool)
            or not isinstance(self.max_cv_ratio, (int, float))
            or not 0 < self.max_cv_ratio <= 1
        ):
            raise InvalidValueError(
                f"{owner}: max_cv_ratio value must be between 0 and 1 (0 excluded, 1 included), got {self.max_cv_ratio!r}"
            )
        if self.max_samples < self.window_size:
            raise InvalidValueError(
                f"{owner}: max_samples must be greater than or equal to window_size, got max_samples="
                f"{self.max_samples}, window_size={self.window_size}"
            )
        self._times: list[float] = []

    def should_stop(self, results: list[ProfilingResultEvent]) -> bool:
        self._times += [r.execution_time for r in results]
        if len(self._times) < self.warmup_samples + self.window_size:
            return False
        window = self._times[-self.window_size :]
        mean = sum(window) / len(window)
        cv = math.sqrt(sum((t - mean) ** 2 for t in window) / len(window)) / mean if mean else math.inf
        if cv <= self.max_cv_ratio:
            return True
        if len(self._times) - self.warmup_samples >= self.max_samples:
            raise RuntimeError(
                f"Unable to collect stable results. Current CV of last window: {cv:.2%}. "
                f"Expected max CV: {self.max_cv_ratio:.2%}."
            )
        return False

    def get_events(self, results: list[ProfilingResultEvent]) -> list[ProfilingResultEvent]:
        return results[-self.window_size :]

    def to_native(self) -> dict[str, int | float | str | None]:
        return {
            "kind": "stable",
            "window_size": self.window_size,
            "max_cv_ratio": self.max_cv_ratio,
            "warmup_samples": self.warmup_samples,
            "max_samples": self.max_samples,
        }
