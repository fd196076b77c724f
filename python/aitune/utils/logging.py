"""AITune's logging helpers: `setup_logging` configures the `aitune` logger (level, format, an
optional log file) and `set_module_level` one logger's level. aitune never touches the root
logger's handlers, so a program's own logging setup stays as it is."""

from __future__ import annotations

import logging
import os
from typing import Union

from aitune.torch.logging_utils import setup_logging as _default_setup

Level = Union[int, str]


def _level(level: Level) -> int:
    if isinstance(level, str):
        value = logging.getLevelName(level.upper())
        if not isinstance(value, int):
            raise ValueError(f"Unknown logging level {level!r}; expected DEBUG, INFO, WARNING, ERROR or CRITICAL")
        return value
    return int(level)


def setup_logging(
    level: Level | None = None,
    format_string: str | None = None,
    log_file: str | os.PathLike | None = None,
    capture_warnings: bool = True,
) -> logging.Logger:
    """The `aitune` logger with aitune's stderr handler, at `level` (INFO unless set before), its
    handlers using `format_string`, and also writing to `log_file` when given."""
    _default_setup()
    logger = logging.getLogger("aitune")
    if level is not None:
        logger.setLevel(_level(level))
    if format_string is not None:
        for handler in logger.handlers:
            handler.setFormatter(logging.Formatter(format_string))
    if log_file is not None:
        path = os.path.abspath(os.fspath(log_file))
        if not any(getattr(h, "baseFilename", None) == path for h in logger.handlers):
            handler = logging.FileHandler(path, encoding="utf-8")
            handler.setFormatter(logging.Formatter(format_string or "%(asctime)s - %(levelname)s - %(message)s"))
            logger.addHandler(handler)
    logging.captureWarnings(capture_warnings)
    return logger


def set_module_level(module_name: str, level: Level) -> None:
    """Sets the level of the logger `module_name` (e.g. "aitune.dynamo")."""
    logging.getLogger(module_name).setLevel(_level(level))
