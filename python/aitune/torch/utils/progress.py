"""A live status line for long tuning steps (builds, correctness checks, measurement sweeps).

Drawn on the terminal only: when file descriptor 2 is a TTY at the start of the step and
AITUNE_PROGRESS is not off. A daemon thread redraws `<text> … <elapsed>` in place every half
second, so a 3-minute AOTInductor build shows that it is alive. The line writes to a duplicate
of the terminal's descriptor taken before the step starts, so it stays on the console while a
build's own output is redirected into build.log (logging_utils.captured_output). Elsewhere
(CI logs, pipes, notebooks) it does nothing: the log lines already say what happens."""

from __future__ import annotations

import logging
import os
import threading
import time

from aitune.torch.utils.env import env_bool

REDRAW_S = 0.5
_CLEAR = "\r\x1b[2K"
_active: LiveLine | None = None  # the innermost open line, which update_live_line() changes


class CandidateProgress:
    """Which candidate of a graph is being worked on and, under a tuning budget, its deadline
    (time.monotonic()): every live line is prefixed with `candidate n/m, T s left`."""

    def __init__(self, index: int, total: int, deadline_s: float | None = None) -> None:
        self.index, self.total, self.deadline_s = index, total, deadline_s

    def text(self, now_s: float | None = None) -> str:
        text = f"candidate {self.index}/{self.total}"
        if self.deadline_s is not None:
            left = self.deadline_s - (time.monotonic() if now_s is None else now_s)
            text += f", {max(0.0, left):.0f} s left" if left > 0 else ", budget spent"
        return text


_candidate: CandidateProgress | None = None


def set_candidate(progress: CandidateProgress | None) -> None:
    """The candidate the live lines name from now on (None: none)."""
    global _candidate
    _candidate = progress


def progress_enabled(fd: int = 2) -> bool:
    try:
        return env_bool("AITUNE_PROGRESS", True) and os.isatty(fd)
    except OSError:
        return False


class LiveLine:
    """`with LiveLine("🔄 building X"):` — a redrawn status line for the duration of the block."""

    def __init__(self, text: str, fd: int = 2, enabled: bool | None = None, interval_s: float = REDRAW_S) -> None:
        self.text = text
        self._fd = fd
        self._enabled = progress_enabled(fd) if enabled is None else enabled
        self._interval_s = interval_s
        self._out: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0
        self._outer: LiveLine | None = None
        self._handlers: list[logging.Handler] = []

    def update(self, text: str) -> None:
        self.text = text

    def render(self) -> str:
        prefix = f"[{_candidate.text()}] " if _candidate is not None else ""
        return f"{prefix}{self.text} … {time.perf_counter() - self._start:.0f} s"

    def __enter__(self) -> LiveLine:
        global _active
        self._start = time.perf_counter()
        self._outer, _active = _active, self
        if self._enabled and self._outer is None:  # one drawing thread: the outermost line draws
            try:
                self._out = os.dup(self._fd)
            except OSError:
                self._out = None
            if self._out is not None:
                self._handlers = _console_handlers()
                for handler in self._handlers:  # a log record first clears the status line
                    handler.addFilter(self._clear_before_record)
                self._thread = threading.Thread(target=self._draw, name="aitune-progress", daemon=True)
                self._thread.start()
        return self

    def _clear_before_record(self, record: logging.LogRecord) -> bool:
        self._write(_CLEAR)
        return True

    def __exit__(self, *exc: object) -> None:
        global _active
        _active = self._outer
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            for handler in self._handlers:
                handler.removeFilter(self._clear_before_record)
        if self._out is not None:
            self._write(_CLEAR)
            os.close(self._out)
            self._out = None

    def _draw(self) -> None:
        while not self._stop.wait(self._interval_s):
            line = (_active or self).render()
            self._write(_CLEAR + line[:200])

    def _write(self, text: str) -> None:
        try:
            os.write(self._out, text.encode("utf-8", "replace"))
        except (OSError, TypeError):
            pass


def _console_handlers() -> list[logging.Handler]:
    """The stream handlers of aitune's and the root logger that write to a terminal."""
    found = []
    for name in ("aitune", None):
        for handler in logging.getLogger(name).handlers:
            stream = getattr(handler, "stream", None)
            try:
                if isinstance(handler, logging.StreamHandler) and stream is not None and stream.isatty():
                    found.append(handler)
            except (AttributeError, ValueError):
                continue
    return found


def current_text() -> str | None:
    """What the innermost open live line shows now (drawn or not), or None outside one."""
    return _active.render() if _active is not None else None


def update_live_line(text: str) -> None:
    """Changes the text of the innermost open live line, if any (e.g. the batch size being measured)."""
    if _active is not None:
        _active.update(text)
