"""A backend that ends the process building it, for the device pool's crash test: it must be
importable by name in the pool's worker processes (they are spawned), hence its own module."""

from __future__ import annotations

import dataclasses
import os

from fake_backend import FakeBackend, FakeBackendConfig


@dataclasses.dataclass
class CrashingBackendConfig(FakeBackendConfig):
    name: str = "crashes"


class CrashingBackend(FakeBackend):
    config_class = CrashingBackendConfig

    def _build(self, module, graph_spec, data, device, cache_dir) -> None:
        os._exit(3)  # as a segfaulting compiler would: no exception, no cleanup


@dataclasses.dataclass
class CrashingWhileMeasuredConfig(FakeBackendConfig):
    name: str = "crashes-while-measured"


class CrashingWhileMeasuredBackend(FakeBackend):
    """Builds and passes the checks, then ends its process in the middle of a measurement, that
    is while holding the pool's measurement turn."""

    config_class = CrashingWhileMeasuredConfig

    def _infer(self, x):
        from aitune.torch.task import sweep

        if getattr(sweep.MEASUREMENT_LOCK[0], "held", False):
            os._exit(4)
        return super()._infer(x)
