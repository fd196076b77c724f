"""The tuning report's data model (docs/reference/tuning.md#telemetry-and-report): run → module → graph →
backend build, as plain dataclasses that turn into JSON (schema_version 4) with `to_json_dict()`.
The recorder (recorder.py) fills them in; the writer (writer.py) puts them on disk."""

from __future__ import annotations

import dataclasses
import math
import traceback

from aitune.utils.json_types import JSON, JSONDict

SCHEMA_VERSION = 4


@dataclasses.dataclass
class BuildReport:
    backend: str
    config: dict[str, object] = dataclasses.field(default_factory=dict)
    key: str | None = None
    duration_s: float | None = None
    success: bool = False
    skipped: str | None = None
    over_budget: str | None = None  # "skipped" or "abandoned" by the tuning budget
    error: dict[str, object] | None = None
    log_file: str | None = None
    build_dir: str | None = None
    artifact_size_bytes: int | None = None
    steps: list[dict[str, object]] = dataclasses.field(default_factory=list)
    correctness: dict[str, object] | None = None
    measurements: list[dict[str, object]] = dataclasses.field(default_factory=list)
    result: dict[str, object] = dataclasses.field(default_factory=dict)
    _start: float = dataclasses.field(default=0.0, repr=False)


@dataclasses.dataclass
class GraphReport:
    name: str
    display_name: str = ""
    input_spec: dict[str, object] = dataclasses.field(default_factory=dict)
    output_spec: dict[str, object] = dataclasses.field(default_factory=dict)
    num_samples: int = 0
    device: str = ""
    cache_dir: str = ""
    strategy: str = ""
    strategy_description: str = ""
    strategy_config: dict[str, object] = dataclasses.field(default_factory=dict)
    selected_backend: str | None = None
    speedup: float | None = None
    # "tuned", "kept_eager" (nothing qualified: the original module serves, see outcome_message)
    # or "reused" (a stored result); None while the graph is tuning or when it failed.
    outcome: str | None = None
    outcome_message: str = ""
    max_batch_search: dict[str, object] = dataclasses.field(default_factory=dict)
    # The tuning budget, when one applies: budget_s, source, left_at_start_s, order, and at the end
    # left_at_end_s, skipped and abandoned (each {"backend", "reason"}).
    budget: dict[str, object] = dataclasses.field(default_factory=dict)
    selection_rule: str = ""
    perf_validation_results: list[dict[str, object]] = dataclasses.field(default_factory=list)
    baseline_measurements: list[dict[str, object]] = dataclasses.field(default_factory=list)
    max_batch_search_measurements: list[dict[str, object]] = dataclasses.field(default_factory=list)
    duration_s: float | None = None
    exception: dict[str, object] | None = None
    builds: list[BuildReport] = dataclasses.field(default_factory=list)
    _start: float = dataclasses.field(default=0.0, repr=False)


@dataclasses.dataclass
class ModuleReport:
    name: str
    outcome: str | None = None  # "tuned", "kept_eager" (passthrough) or "failed"
    duration_s: float | None = None
    exception: dict[str, object] | None = None
    graphs: list[GraphReport] = dataclasses.field(default_factory=list)
    _start: float = dataclasses.field(default=0.0, repr=False)


@dataclasses.dataclass
class RunReport:
    mode: str
    schema_version: int = SCHEMA_VERSION
    aitune_version: str = ""
    started_at: str = ""
    config: dict[str, object] = dataclasses.field(default_factory=dict)
    fingerprint: dict[str, object] = dataclasses.field(default_factory=dict)
    duration_s: float | None = None
    exception: dict[str, object] | None = None
    modules: list[ModuleReport] = dataclasses.field(default_factory=list)
    _start: float = dataclasses.field(default=0.0, repr=False)

    def to_json_dict(self) -> JSONDict:
        return json_safe(self)  # a dataclass becomes a dict


def json_safe(value: object) -> JSON:
    """JSON-safe copy: dataclasses without private fields, non-finite floats as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: json_safe(getattr(value, f.name)) for f in dataclasses.fields(value) if not f.name.startswith("_")
        }
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if hasattr(value, "item") and callable(value.item):
        try:
            return json_safe(value.item())
        except Exception:  # noqa: BLE001
            pass
    return str(value)


def error_dict(exc: BaseException) -> dict[str, str]:
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }
