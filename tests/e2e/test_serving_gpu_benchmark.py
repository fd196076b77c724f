"""benchmarks/serving_gpu.py's smoke path on the CPU (`--device cpu --quick`, tiny models): the
whole benchmark runs under the real Dynamo frontend and workers, and its JSON has every row and
column with sane values. Skips, with the reason, only when ai-dynamo is not installed. Also the
handler benchmark (serving_handler.py), which needs no Dynamo."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from dynamo_processes import REPO, environment, require_dynamo

ROW_KEYS = {"requests_per_s", "p50_ms", "p99_ms", "errors", "model_busy_pct", "gpu_util_pct", "calls_by_size"}


def test_serving_benchmark_cpu_smoke(tmp_path):
    require_dynamo()
    out, table = tmp_path / "serving.json", tmp_path / "serving.md"
    command = [sys.executable, str(REPO / "benchmarks" / "serving_gpu.py"), "--device", "cpu", "--quick"]
    command += ["--seconds", "0.5", "--warmup-s", "0.3", "--out", str(out), "--markdown", str(table)]
    command += ["--work-dir", str(tmp_path / "work")]
    result = subprocess.run(command, env=environment(tmp_path), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    report = json.loads(out.read_text())
    assert set(report["models"]) == {"embedding", "image"}
    for kind, model in report["models"].items():
        assert list(model["direct"]) == ["1", "2", "4", "8"], kind
        assert all(d["p50_ms"] > 0 and d["with_copies_p50_ms"] > 0 for d in model["direct"].values())
        grid = [(r["mode"], r["clients"], r["workers"]) for r in model["rows"]]
        assert grid == [
            ("off", 1, 1),
            ("off", 8, 1),
            ("on", 1, 1),
            ("on", 8, 1),
            ("off2", 8, 2),
            ("on2", 8, 2),
            ("off-f2", 8, 2),
            ("on-f2", 8, 2),
            ("echo", 1, 1),
            ("echo", 8, 1),
            ("echo_inline", 1, 1),
            ("echo_inline", 8, 1),
        ], kind
        for row in model["rows"]:
            assert ROW_KEYS <= set(row), (kind, row)
            assert row["requests_per_s"] > 0 and row["errors"] == 0, (kind, row)
            assert row["p99_ms"] >= row["p50_ms"] > 0, (kind, row)
            # Every row's workers used CPU time for the requests they served (read from /proc).
            assert row["worker_cpu_ms_per_request"] > 0, row
            if row["mode"] in ("echo", "echo_inline"):  # the path's floor: no model, no batcher
                assert row["model_busy_pct"] == 0 and row["calls_by_size"] == {}, row
                assert row["per_worker"][0]["served"] > 0, row
                continue
            assert row["gpu_util_pct"] is None and 0 < row["model_busy_pct"] <= 100 * row["workers"] + 5, row
            assert row["calls_by_size"] and {int(s) for s in row["calls_by_size"]} <= {1, 2, 4, 8}, row
            if row["mode"].startswith("off"):
                assert list(row["calls_by_size"]) == ["1"], f"max_wait_ms=0 runs every item alone: {row}"
            assert all(w["items"] > 0 for w in row["per_worker"]), f"every worker served: {row['per_worker']}"
        assert {
            "on_over_off_requests_per_s",
            "on_p99_over_p50",
            "off_1_client_minus_direct_ms",
            "echo_1_client_p50_ms",
            "echo_requests_per_s",
            "echo_inline_1_client_p50_ms",
            "echo_inline_requests_per_s",
            "echo_inline_worker_cpu_ms_per_request",
            "on2_over_off_requests_per_s",
            "on2_over_off2_requests_per_s",
            "on2_p99_over_p50",
            "on-f2_over_off_requests_per_s",
            "on-f2_over_off-f2_requests_per_s",
            "on-f2_p99_over_p50",
        } <= set(model["summary"])
        fed = [r for r in model["rows"] if "-f" in r["mode"]]
        assert fed and all(r["engines"] == 1 for r in fed), "one engine process behind the fronts"
    assert "| workers | batching | clients | requests/s |" in table.read_text()
    assert "worker CPU ms/request" in table.read_text()


def test_a_machine_without_dynamos_dependencies_stops_before_tuning(tmp_path):
    """The first GPU run tuned for minutes before the frontend died on `import pydantic`; the
    benchmark now imports what the frontend imports first, in a fresh interpreter, and stops."""
    fake = tmp_path / "fake" / "dynamo"
    (fake / "frontend").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "frontend" / "__init__.py").write_text("")
    (fake / "frontend" / "main.py").write_text("import pydantic_is_not_installed_here  # noqa\n")
    env = environment(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path / "fake"), env.get("PYTHONPATH")]))
    work = tmp_path / "work"
    command = [sys.executable, str(REPO / "benchmarks" / "serving_gpu.py"), "--device", "cpu", "--quick"]
    command += ["--work-dir", str(work), "--out", str(tmp_path / "serving.json")]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Dynamo's frontend cannot be imported here" in result.stderr
    assert "No module named 'pydantic_is_not_installed_here'" in result.stderr
    assert not (work / "embedding.ait").exists() and not (tmp_path / "serving.json").exists()  # nothing tuned


def test_a_launcher_failure_reports_the_end_of_its_log(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from serving_gpu import log_tail
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    log = tmp_path / "embedding-off.log"
    log.write_text("\n".join(f"line {i}" for i in range(40)) + "\nModuleNotFoundError: No module named 'pydantic'\n")
    text = log_tail(RuntimeError(f"a launcher exited with code 1; see {log}"))
    assert text.startswith("a launcher exited with code 1")
    assert text.endswith("ModuleNotFoundError: No module named 'pydantic'")
    assert "line 29" in text and "line 28" not in text  # the last 12 lines of the log
    assert log_tail(RuntimeError("no log named")) == "no log named"


def test_the_handler_benchmark_serves_every_request_through_the_batcher(tmp_path):
    """benchmarks/serving_handler.py (aitune's cost per request without Dynamo): every request of
    every client is answered, in tuned batches, and both costs are reported."""
    command = [sys.executable, str(REPO / "benchmarks" / "serving_handler.py"), "--requests", "640", "--clients", "8"]
    result = subprocess.run(command, env=environment(tmp_path), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["requests"] == 640
    assert sum(int(size) * n for size, n in report["calls_by_size"].items()) >= 640
    assert {int(size) for size in report["calls_by_size"]} <= {1, 2, 4, 8, 16, 32}
    assert report["cpu_ms_per_request"] > 0 and report["model_thread_busy_ms_per_request"] > 0
