"""When to stop sweeping batch sizes (docs/reference/measurement.md#batch-sweep). The rule is the C++ core's
`SweepState`, used by aitune's sweep and, through `should_stop`, on AITune-style event lists (docs/guide.md,
"Coming from AITune"): one implementation of the saturation rule."""

from __future__ import annotations

import abc
import dataclasses

from aitune._native import _C
from aitune.exceptions import AITuneUserInputError, InvalidValueError
from aitune.torch.task.profiling.events import ProfilingResultEvent
from aitune.torch.task.profiling.metrics import get_batch_size, get_throughput


class ProfilingStopStrategy(abc.ABC):
    @abc.abstractmethod
    def should_stop(self, results: list[ProfilingResultEvent]) -> bool:
        """Called with the events of each batch size in turn; True ends the sweep."""

    @abc.abstractmethod
    def to_native(self) -> dict[str, int | float | str | None]:
        """The rule in the form the C++ sweep takes."""


@dataclasses.dataclass
class AllSamplesProfilingStopStrategy(ProfilingStopStrategy):
    """Never stops early: every batch size is measured."""

    def should_stop(self, results: list[ProfilingResultEvent]) -> bool:
        return False

    def to_native(self) -> dict[str, int | float | str | None]:
        return {"rule": "all"}


@dataclasses.dataclass
class ThroughputSaturatedProfilingStopStrategy(ProfilingStopStrategy):
    """A batch size is saturated when its throughput × (1 − `min_throughput_gain_ratio`) is below
    the best so far; the sweep stops at the (`throughput_backoff_limit` + 1)-th saturated size in
    a row."""

    min_throughput_gain_ratio: float = 0.05
    throughput_backoff_limit: int = 2

    def __post_init__(self) -> None:
        owner = type(self).__name__
        ratio, limit = self.min_throughput_gain_ratio, self.throughput_backoff_limit
        # The core validates its own rule below; these two checks word the refusal as AITune does.
        if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and not 0 <= ratio < 1:
            raise InvalidValueError(
                f"{owner}: min_throughput_gain_ratio value must be between 0 and 1 (1 excluded), got {ratio!r}"
            )
        if isinstance(limit, int) and not isinstance(limit, bool) and limit < 0:
            raise InvalidValueError(f"{owner}: throughput_backoff_limit value must not be negative, got {limit}.")
        try:
            _C.SweepState(**self.to_native())
        except AITuneUserInputError as e:
            raise InvalidValueError(f"{type(self).__name__}: {e}") from None
        except TypeError:  # not a number at all
            raise InvalidValueError(
                f"{type(self).__name__}: min_throughput_gain_ratio must be a number in [0, 1) and "
                f"throughput_backoff_limit an integer >= 0, got {self.min_throughput_gain_ratio!r}, "
                f"{self.throughput_backoff_limit!r}"
            ) from None

    def should_stop(self, results: list[ProfilingResultEvent]) -> bool:
        # The sizes seen so far are replayed into a fresh core SweepState: the strategy stays a
        # plain, deep-copyable dataclass (strategies are cloned), and the rule stays the core's.
        seen = self.__dict__.setdefault("_seen", [])
        seen.append((get_batch_size(results), get_throughput(results)))
        sweep = _C.SweepState(**self.to_native())
        stop = False
        for batch_size, throughput in seen:
            stop = bool(sweep.add(batch_size, throughput))
        return stop

    def to_native(self) -> dict[str, int | float | str | None]:
        return {
            "rule": "saturated",
            "min_throughput_gain_ratio": self.min_throughput_gain_ratio,
            "throughput_backoff_limit": self.throughput_backoff_limit,
        }
