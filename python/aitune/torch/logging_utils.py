"""aitune's logger and the build-output capture (docs/reference/tuning.md).

aitune configures only the `aitune` logger and never touches root handlers."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

from aitune.torch.utils.env import env_bool

logger = logging.getLogger("aitune")
_FORMAT = "%(asctime)s - %(levelname)s - %(message)s"


class _CurrentStderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at emit time, so a handler created while stderr was
    redirected (pytest, notebooks) never writes to a closed stream later."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def setup_logging() -> None:
    """Gives the `aitune` logger one stderr handler (once) and INFO level if unset."""
    if not any(getattr(h, "_aitune", False) for h in logger.handlers):
        handler = _CurrentStderrHandler()
        handler.setFormatter(logging.Formatter(_FORMAT))
        handler._aitune = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


def indent(text: str, spaces: int = 2) -> str:
    pad = " " * spaces
    return "\n".join(pad + line for line in text.splitlines())


@contextlib.contextmanager
def external_logging_disabled(disable: bool) -> Iterator[None]:
    """Silences loggers outside aitune (below ERROR) while tuning, if asked. Not logging.disable():
    that is global and would silence aitune's own lines too. Every other logger's level is raised
    instead; loggers created meanwhile inherit the root's."""
    if not disable:
        yield
        return
    saved: dict[logging.Logger, int] = {logging.root: logging.root.level}
    for name, other in list(logging.root.manager.loggerDict.items()):
        if isinstance(other, logging.Logger) and name != logger.name and not name.startswith(logger.name + "."):
            saved[other] = other.level
    for other in saved:
        other.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for other, level in saved.items():
            other.setLevel(level)


_capture_lock = threading.Lock()


@contextlib.contextmanager
def captured_output(log_file: Path) -> Iterator[None]:
    """Sends everything written to file descriptors 1 and 2 (Python, C++ libraries, compilers)
    to `log_file` while a backend builds. With AITUNE_CONSOLE_OUTPUT=1 the console keeps it."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    if env_bool("AITUNE_CONSOLE_OUTPUT", False):
        with open(log_file, "a") as f:
            f.write(f"(AITUNE_CONSOLE_OUTPUT=1: build output went to the console at {time.ctime()})\n")
        yield
        return
    with _capture_lock, open(log_file, "a", buffering=1) as text:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        target = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.dup2(target, 1)
            os.dup2(target, 2)
            # Python-level writes too: under pytest or Jupyter sys.stdout is not file descriptor 1.
            with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (*saved, target):
                os.close(fd)


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.2f}s"
    return f"{seconds / 60:.2f}min"
