"""What the tuning report reads from a strategy and a backend. Telemetry sits below the backend
and strategy layers (docs/design.md#layers), so it names the shape it uses, not the classes:
`TuneStrategy` and `Backend` satisfy these protocols."""

from __future__ import annotations

from typing import Mapping, Protocol


class ReportedBackend(Protocol):
    config: object

    def describe(self) -> str: ...

    def key(self) -> str: ...


class ReportedStrategy(Protocol):
    def describe(self) -> str: ...

    def selection_rule(self) -> str: ...

    def to_json_dict(self) -> Mapping[str, object]: ...
