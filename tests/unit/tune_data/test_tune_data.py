"""Tuning telemetry JSON and HTML report (docs/reference/tuning.md#telemetry-and-report) on a CPU with the fake
backend."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import torch

import aitune.torch as ait
from aitune.torch.config import config
from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig
from aitune.torch.tune_data import SCHEMA_VERSION, render_html, snapshot_tuning_data

from fake_backend import FakeBackend, FakeBackendConfig, SleepyLinear


def _strategy() -> ait.MaxThroughputStrategy:
    profiling = ProfilingConfig(batch_sizes=[1, 2], measurement_stop_strategy=NumStepsMeasuringStopStrategy(3, 1))
    strategy = ait.MaxThroughputStrategy(
        [FakeBackend(FakeBackendConfig(name="broken", fail_build=True)), FakeBackend(FakeBackendConfig(name="good"))],
        profiling_config=profiling,
    )
    return strategy.enable_find_max_batch_size(False)


def _run_tune(name: str = "lin") -> ait.Module:
    m = ait.Module(SleepyLinear(0.003).eval(), name, strategy=_strategy())
    dataset = [torch.randn(8) for _ in range(4)]
    ait.tune(m, dataset, batch_sizes=[1, 2], device="cpu")
    return m


def test_json_hierarchy_failures_selection_and_measurements():
    m = _run_tune()
    path = config.tuning_data_output_path
    assert path == config.cache_dir / "tuning_data" / "report.json"
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION == 4
    assert data["duration_s"] is not None and data["exception"] is None
    assert data["config"]["cache_dir"] == str(config.cache_dir)
    assert "torch" in data["fingerprint"]
    (module,) = data["modules"]
    assert module["name"] == "lin"
    (graph,) = module["graphs"]
    assert graph["strategy"] == "MaxThroughputStrategy"
    assert graph["input_spec"]["tensors"] and graph["output_spec"]["tensors"]
    builds = {b["backend"]: b for b in graph["builds"]}
    broken = next(b for d, b in builds.items() if "broken" in d)
    good = next(b for d, b in builds.items() if "good" in d)
    assert broken["success"] is False
    assert broken["error"]["type"] == "RuntimeError" and "fake build failure" in broken["error"]["message"]
    assert "Traceback" in broken["error"]["traceback"]
    assert broken["log_file"].endswith("build.log")
    assert good["success"] is True and good["duration_s"] >= 0
    assert [s["name"] for s in good["steps"]][:1] == ["build"]
    assert good["correctness"]["passed"] is True and good["correctness"]["precision_class"] == "fp32"
    assert good["measurements"] and {
        "batch_size",
        "host_latency_ms_median",
        "host_latency_ms_p99",
        "throughput_per_s",
    } <= set(good["measurements"][0])
    assert graph["baseline_measurements"]
    selected = m.tuned_module.backends[0][1].describe()
    assert graph["selected_backend"] == selected
    assert graph["selection_rule"].startswith("MaxThroughputStrategy")
    if selected == good["backend"]:
        assert graph["speedup"] is not None and graph["speedup"] > 1


def test_html_report_is_self_contained():
    _run_tune()
    report = config.tuning_report_path
    text = report.read_text()
    assert "http://" not in text and "https://" not in text
    assert "<svg" in text
    data = json.loads(config.tuning_data_output_path.read_text())
    for build in data["modules"][0]["graphs"][0]["builds"]:
        assert build["backend"] in text or build["backend"].replace('"', "&quot;").replace("'", "&#x27;") in text
        assert build["log_file"] in text
    assert "eager baseline" in text
    # Each candidate's error beside its speed: the Correctness column carries the worst rel_l2.
    good = next(b for b in data["modules"][0]["graphs"][0]["builds"] if "good" in b["backend"])
    assert good["correctness"]["worst"]["rel_l2_error"] == 0.0
    assert "passed (fp32; rel_l2 0; decided by" in text


def test_env_var_relocates_telemetry(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere" / "t.json"
    monkeypatch.setenv("AITUNE_TUNING_DATA_PATH", str(target))
    config.reset_to_defaults()
    config.cache_dir = tmp_path / "cache2"
    _run_tune()
    assert json.loads(target.read_text())["schema_version"] == 4
    assert not (config.cache_dir / "tuning_data" / "report.json").exists()


def test_config_relocates_telemetry_and_snapshot(tmp_path):
    target = tmp_path / "custom" / "data.json"
    config.tuning_data_output_path = target
    config.tuning_report_path = tmp_path / "custom" / "report.html"
    _run_tune()
    assert target.exists() and (tmp_path / "custom" / "report.html").exists()
    copy = snapshot_tuning_data(tmp_path / "copy.json")
    assert json.loads(copy.read_text())["modules"][0]["name"] == "lin"


def test_telemetry_write_failure_does_not_fail_tuning(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    config.tuning_data_output_path = blocked  # a directory: every write fails
    config.tuning_report_path = tmp_path / "blocked_report"
    (tmp_path / "blocked_report").mkdir()
    m = _run_tune()
    assert m.tuned_module is not None


def test_render_html_escapes_and_tolerates_sparse_data():
    text = render_html(
        {
            "schema_version": 4,
            "modules": [
                {
                    "name": "<m>",
                    "graphs": [
                        {"name": "g", "builds": [{"backend": "B<x>", "skipped": "not installed", "success": False}]}
                    ],
                }
            ],
        }
    )
    assert "&lt;m&gt;" in text and "not installed" in text and "<m>" not in text


def test_html_renders_in_headless_chromium(tmp_path):
    browser = next(
        (
            shutil.which(b)
            for b in ("chromium", "chromium-browser", "google-chrome", "headless_shell")
            if shutil.which(b)
        ),
        None,
    )
    if browser is None:
        pytest.skip("no headless chromium installed")
    _run_tune()
    out = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", config.tuning_report_path.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "<svg" in out.stdout
