"""JIT telemetry (docs/reference/tuning.md#telemetry-and-report): each tuned module is one run span of the shared
telemetry, merged into one process-wide run, written as JSON after every module and as the HTML report at exit."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from pathlib import Path
from typing import Iterator

from aitune.torch.config import config
from aitune.torch.jit.config import config as jit_config
from aitune.torch.tune_data import recorder as tune_data
from aitune.torch.tune_data.html_report import render_html
from aitune.torch.tune_data.model import RunReport
from aitune.torch.utils.fs import atomic_write_text

logger = logging.getLogger("aitune")


class _Telemetry:
    run: RunReport | None = None  # the merged run (None until a module is tuned)
    started: float = 0.0


_telemetry = _Telemetry()


def reset() -> None:
    _telemetry.run = None


@contextlib.contextmanager
def jit_module_span(name: str) -> Iterator[None]:
    spans: list[RunReport] = []
    try:
        with tune_data.run_span("JIT", write_html=False) as run:
            spans.append(run)
            with tune_data.module_span(name):
                yield
    finally:
        if spans:
            _merge(spans[0])


def _merge(run: RunReport) -> None:
    if _telemetry.run is None:
        _telemetry.run, _telemetry.started = run, time.perf_counter() - (run.duration_s or 0.0)
        with contextlib.suppress(Exception):
            run.config = dict(run.config, jit=jit_config.to_dict())
    elif run is not _telemetry.run:
        _telemetry.run.modules.extend(run.modules)
    _telemetry.run.duration_s = round(time.perf_counter() - _telemetry.started, 3)
    write_json()


def write_json() -> Path | None:
    if _telemetry.run is None:
        return None
    path = Path(config.tuning_data_output_path)
    try:
        atomic_write_text(path, json.dumps(_telemetry.run.to_json_dict(), indent=2, default=str))
    except OSError as e:
        logger.warning("⚠️ JIT: could not write the tuning data to %s: %s", path, e)
        return None
    return path


def write_html() -> Path | None:
    """The HTML report of every module tuned in this process (docs/reference/tuning.md#telemetry-and-report: at JIT
    exit)."""
    if _telemetry.run is None:
        return None
    path = Path(config.tuning_report_path)
    try:
        atomic_write_text(path, render_html(_telemetry.run.to_json_dict(), path))
    except Exception as e:  # noqa: BLE001 - the report is best effort at exit
        logger.warning("⚠️ JIT: could not write the tuning report to %s: %s: %s", path, type(e).__name__, e)
        return None
    return path
