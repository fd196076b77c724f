"""One timed call, in AITune's event form (docs/guide.md, "Coming from AITune"). aitune's own
measurement runs in the C++ core and reports statistics; these events are what the Python-side
rules (`should_stop`) and custom measuring strategies exchange."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class ProfilingResultEvent:
    """`execution_time` is in nanoseconds (host clock); `timestamp` when the call started."""

    timestamp: float
    model_name: str | None
    backend_details: str | None
    batch_size: int
    phase: str
    measurement_id: int = 0
    execution_time: float = 0.0


def get_inference_events(events: list[ProfilingResultEvent]) -> list[ProfilingResultEvent]:
    return [e for e in events if e.phase.startswith("inference")]
