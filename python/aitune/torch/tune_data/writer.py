"""Puts the tuning report on disk (docs/reference/tuning.md#telemetry-and-report): the JSON at
`config.tuning_data_output_path` and the HTML page at `config.tuning_report_path`, each replaced
atomically. Best effort: a failed write is logged once per run and ignored, except a full disk
(ENOSPC), which raises DiskSpaceError: tuning would fail later anyway, with a less clear error."""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

from aitune.exceptions import DiskSpaceError
from aitune.torch.config import config
from aitune.torch.tune_data.html_report import render_html
from aitune.torch.tune_data.model import RunReport
from aitune.torch.utils.fs import atomic_write_text

logger = logging.getLogger("aitune")


class _Failures:
    logged = False  # a failed write was logged in this run: the next ones are not


_failures = _Failures()


def reset_failure_log() -> None:
    """A new run logs its first failed write again."""
    _failures.logged = False


def write_best_effort(path: Path, text: str) -> None:
    try:
        atomic_write_text(path, text)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise DiskSpaceError(f"No space left on device while writing {path}: {e}") from e
        if not _failures.logged:
            _failures.logged = True
            logger.warning("⚠️ Could not write tuning data to %s: %s: %s", path, type(e).__name__, e)


def write_json(run: RunReport, path: Path | None = None) -> Path:
    """The run's JSON at `path` (default config.tuning_data_output_path); returns the path."""
    target = path if path is not None else Path(config.tuning_data_output_path)
    write_best_effort(target, json.dumps(run.to_json_dict(), indent=2, default=str))
    return target


def write_html(run: RunReport) -> None:
    """The run's HTML report at config.tuning_report_path."""
    try:
        html = render_html(run.to_json_dict(), config.tuning_report_path)
    except Exception as e:  # noqa: BLE001 - the report is best effort
        logger.warning("⚠️ Could not render the tuning report: %s: %s", type(e).__name__, e)
        return
    write_best_effort(Path(config.tuning_report_path), html)
