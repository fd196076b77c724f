"""The tuning HTML report (docs/reference/tuning.md#telemetry-and-report) rendered by a real headless browser (Debian's
chromium): after the page is laid out, the DOM holds the plots with one line per backend plus the eager
baseline, the selection, and no "undefined"/"NaN" text; a screenshot is a real, non-blank image."""

from __future__ import annotations

import html
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState
from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig

from fake_backend import FakeBackend, FakeBackendConfig, SleepyLinear

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (apt-get install chromium)")
FAST, SLOW = "FakeBackend(name='fast', delay_s=0.0005)", "FakeBackend(name='slow', delay_s=0.002)"


def _chromium(tmp_path: Path, *args: str) -> str:
    # its own profile folder: nothing lands in the user's home
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        *args,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180, errors="replace")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _png_size_and_colours(data: bytes) -> tuple[int, int, int]:
    """(width, height, number of distinct byte values in the decompressed pixel rows)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


@pytest.fixture
def report(tmp_path) -> Path:
    """ait.tune of a tiny model with two fake backends at batch sizes 1 and 2."""
    config.tuning_report_path = tmp_path / "report.html"
    profiling = ProfilingConfig(batch_sizes=[1, 2], measurement_stop_strategy=NumStepsMeasuringStopStrategy(5, 2))
    strategy = ait.MaxThroughputStrategy(
        [
            FakeBackend(FakeBackendConfig(name="fast", delay_s=0.0005)),
            FakeBackend(FakeBackendConfig(name="slow", delay_s=0.002)),
        ],
        profiling,
    )
    strategy.enable_find_max_batch_size(False)
    m = ait.Module(SleepyLinear(0.003).eval(), "tiny", strategy=strategy)
    ait.tune(m, [torch.randn(8) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
    assert m.state is ModuleState.TUNED
    assert config.tuning_report_path.is_file()
    return config.tuning_report_path


def test_the_browser_renders_plots_lines_and_the_selection(report, tmp_path):
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri())
    assert "aitune tuning report" in dom
    assert "<tbody>" in dom and "<tbody>" not in report.read_text()  # the browser's parsed DOM, not the file
    svgs = re.findall(r"<svg\b.*?</svg>", dom, flags=re.S)
    by_title = {re.search(r'aria-label="([^"]*)"', s).group(1): s for s in svgs}
    assert set(by_title) >= {"Latency (mean, whiskers p90/p99)", "Throughput", "Build time"}
    for title in ("Latency (mean, whiskers p90/p99)", "Throughput"):
        chart = by_title[title]
        lines = re.findall(r"<polyline\b[^>]*>", chart)
        assert len(lines) == 3, f"{title}: one line per backend plus eager, got {len(lines)}"
        assert len({re.search(r'stroke="([^"]+)"', line).group(1) for line in lines}) == 3
        for line in lines:  # two batch sizes: two points per line
            assert len(re.search(r'points="([^"]+)"', line).group(1).split()) == 2
        legend = html.unescape(chart)
        assert "eager baseline" in legend and FAST in legend and SLOW in legend  # full names in the tooltips
    assert len(re.findall(r"<rect\b", by_title["Build time"])) == 2  # a bar per built backend

    text = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<(style|title)\b.*?</\1>", " ", dom, flags=re.S)))
    text = re.sub(r"\s+", " ", text)
    assert f"Selected: {FAST}" in text and "speedup vs eager:" in text
    assert "Rule: MaxThroughputStrategy" in text
    values = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<(style|title|th)\b.*?</\1>", " ", dom, flags=re.S)))
    for bad in ("undefined", "NaN", "nan", "inf"):  # a header "NaN" (the has-NaN column) is fine; values are not
        assert not re.search(rf"\b{bad}\b", values), f"{bad!r} shown in the report"


def test_the_screenshot_is_a_real_page_image(report, tmp_path):
    shot = tmp_path / "report.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", report.as_uri())
    data = shot.read_bytes()
    width, height, colours = _png_size_and_colours(data)
    assert (width, height) == (1280, 2000)
    assert len(data) > 30_000, f"{len(data)} bytes: an almost empty page"
    assert colours > 50, "the screenshot is (nearly) a single colour"
