"""The live status line of long tuning steps: drawn on a terminal only, redrawn while the step
runs, cleared at the end, and kept on the terminal while the build's output is redirected."""

from __future__ import annotations

import os
import time

import pytest

from aitune.torch.utils.progress import LiveLine, update_live_line


def _read_all(fd: int) -> str:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture
def terminal():
    master, slave = os.openpty()
    yield master, slave
    os.close(master)
    os.close(slave)


def test_draws_on_a_terminal_updates_and_clears(terminal, monkeypatch):
    monkeypatch.delenv("AITUNE_PROGRESS", raising=False)
    master, slave = terminal
    with LiveLine("🔄 building X", fd=slave, interval_s=0.02):
        time.sleep(0.1)
        update_live_line("📏 measuring X at batch size 4")
        time.sleep(0.1)
    text = _read_all(master)
    assert "🔄 building X … 0 s" in text
    assert "📏 measuring X at batch size 4 … 0 s" in text
    assert text.endswith("\r\x1b[2K")  # the line is cleared when the step ends


def test_nested_lines_draw_the_innermost_text_from_one_thread(terminal):
    master, slave = terminal
    with LiveLine("outer", fd=slave, enabled=True, interval_s=0.02):
        with LiveLine("inner", fd=slave, enabled=True, interval_s=0.02) as inner:
            assert inner._thread is None
            time.sleep(0.1)
        time.sleep(0.1)
    text = _read_all(master)
    assert "inner … " in text and text.rindex("outer … ") > text.index("inner … ")


def test_stays_on_the_terminal_while_the_descriptor_is_redirected(terminal, tmp_path):
    """captured_output() points fd 1/2 at build.log during a build; the line must not land there."""
    master, slave = terminal
    log = tmp_path / "build.log"
    saved = os.dup(slave)
    with LiveLine("🔄 building", fd=slave, enabled=True, interval_s=0.02):
        target = os.open(log, os.O_WRONLY | os.O_CREAT)
        os.dup2(target, slave)
        try:
            os.write(slave, b"compiler output\n")
            time.sleep(0.1)
        finally:
            os.dup2(saved, slave)
            os.close(target)
    os.close(saved)
    assert log.read_text() == "compiler output\n"
    assert "🔄 building … " in _read_all(master)


def test_silent_off_a_terminal_and_when_switched_off(terminal, monkeypatch):
    read_end, write_end = os.pipe()
    with LiveLine("x", fd=write_end, interval_s=0.01) as line:
        time.sleep(0.05)
    assert line._thread is None
    os.close(write_end)
    assert os.read(read_end, 100) == b""
    os.close(read_end)
    master, slave = terminal
    monkeypatch.setenv("AITUNE_PROGRESS", "0")
    with LiveLine("y", fd=slave, interval_s=0.01):
        time.sleep(0.05)
    assert _read_all(master) == ""


def test_a_log_record_clears_the_status_line_first(terminal):
    import logging

    master, slave = terminal
    stream = os.fdopen(os.dup(slave), "w", buffering=1)
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("aitune")
    logger.addHandler(handler)
    try:
        with LiveLine("🔄 building", fd=slave, enabled=True, interval_s=0.02):
            time.sleep(0.08)
            logger.warning("a record")
            time.sleep(0.05)
        assert not handler.filters  # removed with the line
    finally:
        logger.removeHandler(handler)
        stream.close()
    text = _read_all(master)
    assert "\r\x1b[2Ka record" in text
