"""Faults while tuning (issue 27, part 5; docs/guide.md "Faults while tuning"): a candidate that
runs out of memory, a worker process killed with SIGKILL, Ctrl-C in the middle of ait.tune and a
disk that fills up while the results store or a build is written. Each leaves the earlier work
serving, nothing half-written for the next process, and a next ait.tune that succeeds.

The out-of-memory error is simulated on the CPU (a fake backend raising torch.OutOfMemoryError
after holding a block); tests/gpu/test_tuning_faults_gpu.py gets a real one from the CUDA
allocator. SIGKILL and SIGINT are real signals. The full disk is a real one: a small tmpfs
mounted for the test (root only; skipped with the reason elsewhere)."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune import exceptions as errors
from aitune.torch import module_registry
from aitune.torch.checkpoint.format import OpenedCheckpoint
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState
from aitune.torch.utils.fs import atomic_write_text

from fake_backend import FakeBackend, FakeBackendConfig, SleepyLinear
from fault_backends import (
    BlobBackend,
    BlobConfig,
    InterruptingBackend,
    KilledBackend,
    OutOfMemoryBackend,
    OutOfMemoryConfig,
)


class MemoryWitness(FakeBackend):
    """A candidate tried after another ran out of memory: records, when it builds, whether the
    memory the failed candidate held is free by then."""

    seen: list[list[bool]] = []

    def _build(self, module, graph_spec, data, device, cache_dir) -> None:
        MemoryWitness.seen.append([ref() is None for ref in OutOfMemoryBackend.held])
        super()._build(module, graph_spec, data, device, cache_dir)


def _first_wins(*candidates):
    return ait.FirstWinsStrategy(list(candidates)).enable_find_max_batch_size(False)


def _tune(name: str, strategy, model: torch.nn.Module | None = None, **kwargs) -> ait.Module:
    torch.manual_seed(0)
    m = ait.Module(model if model is not None else SleepyLinear(0.0).eval(), name, strategy=strategy)
    ait.tune(m, [torch.randn(8) for _ in range(4)], batch_sizes=[1, 2], device="cpu", **kwargs)
    return m


def _served(m: ait.Module) -> torch.Tensor:
    with torch.no_grad():
        return m(torch.ones(2, 8))


# -- out of memory ------------------------------------------------------------------------------
def test_a_candidate_out_of_memory_is_skipped_with_the_reason_and_its_memory_freed(aitune_log):
    OutOfMemoryBackend.held.clear()
    MemoryWitness.seen.clear()
    strategy = _first_wins(
        OutOfMemoryBackend(OutOfMemoryConfig()), MemoryWitness(FakeBackendConfig(name="next"))
    ).enable_performance_validation(False)
    m = _tune("m", strategy)
    assert m.state is ModuleState.TUNED
    assert m.tuned_module.backends[0][1].config.name == "next"
    failed = strategy.backend_results[0]
    assert not failed["success"] and failed["error"].startswith("OutOfMemoryError: CUDA out of memory")
    assert "out of memory" in aitune_log.text and "memory released, trying the next candidate" in aitune_log.text
    assert MemoryWitness.seen == [[True]], "the next candidate built while the failed one's memory was held"


def test_out_of_memory_while_serving_a_candidate_is_a_failed_candidate(aitune_log):
    strategy = _first_wins(
        FakeBackend(FakeBackendConfig(name="oom-on-call", oom_after_calls=1)), FakeBackend(FakeBackendConfig(name="ok"))
    ).enable_performance_validation(False)
    m = _tune("m", strategy)
    assert m.tuned_module.backends[0][1].config.name == "ok"
    assert "fake: out of memory at call" in strategy.backend_results[0]["error"]
    assert "ran out of memory: memory released, trying the next candidate" in aitune_log.text


# -- a worker killed with SIGKILL -----------------------------------------------------------------
def test_a_worker_killed_with_sigkill_is_reported_and_tuning_goes_on(aitune_log):
    """The device pool's worker building the first candidate is killed (as the kernel's OOM killer
    ends a compiler): its candidate fails naming the signal, the other worker's candidate wins."""
    import multiprocessing

    strategy = (
        ait.FirstWinsStrategy([KilledBackend(), FakeBackend(FakeBackendConfig(name="good"))])
        .enable_find_max_batch_size(False)
        .enable_performance_validation(False)
    )
    m = _tune("m", strategy, devices=["cpu", "cpu"])
    assert m.tuned_module.backends[0][1].config.name == "good"
    killed = strategy.backend_results[0]
    assert killed["backend"] == "KilledBackend()" and not killed["success"]
    assert "was killed by SIGKILL" in killed["error"], killed["error"]
    assert multiprocessing.active_children() == []


def test_a_killed_compile_worker_of_torch_compile_is_survived(aitune_log):
    """Inductor compiles in a pool of subprocesses: with them killed (SIGKILL) before the build,
    the Inductor JIT candidate either compiles anyway or fails with the reason; tuning ends with a
    served module either way, in bounded time."""
    import time

    from torch._inductor import config as inductor_config
    from torch._inductor.async_compile import AsyncCompile, shutdown_compile_workers

    from aitune.torch.backend import TorchEagerBackend, TorchInductorJitBackend

    with inductor_config.patch(compile_threads=2, worker_start_method="subprocess"):
        try:
            AsyncCompile.warm_pool()
            workers = _compile_workers(os.getpid())
            if not workers:
                pytest.skip("torch started no compile worker process here")
            for pid in workers:
                os.kill(pid, signal.SIGKILL)
            start = time.monotonic()
            strategy = _first_wins(TorchInductorJitBackend(), TorchEagerBackend()).enable_performance_validation(False)
            model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
            m = _tune("m", strategy, model=model)
            assert time.monotonic() - start < 600
        finally:
            shutdown_compile_workers()  # the other tests compile in this process, as by default
    assert m.state is ModuleState.TUNED
    first = strategy.backend_results[0]
    assert first["success"] or first.get("error"), first
    torch.testing.assert_close(_served(m), model(torch.ones(2, 8)))


def _compile_workers(parent: int) -> list[int]:
    """Inductor's compile worker processes of `parent` (and the processes they forked)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if "compile_worker" in cmdline and f"--parent={parent}" in cmdline:
            found.append(int(entry.name))
    return found


# -- Ctrl-C ---------------------------------------------------------------------------------------
def _store_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "results").rglob("*") if p.is_file())


def test_ctrl_c_during_ait_tune_keeps_earlier_modules_and_a_consistent_cache(aitune_log):
    """A real SIGINT while module b's candidate builds: module a (tuned and stored before) keeps
    serving, the results store holds only whole files (a's), nothing is half-written, b can be
    tuned by the next ait.tune, which then succeeds and stores it."""
    InterruptingBackend.fired.clear()
    config.device_after_tuning = "cpu"
    a = _tune("a", _first_wins(BlobBackend(BlobConfig(blob_bytes=4096))).enable_performance_validation(False))
    expected_a = _served(a)
    stored_before = _store_files(config.cache_dir)
    assert [p.suffix for p in stored_before] == [".ait"]

    b_strategy = _first_wins(InterruptingBackend(), BlobBackend(BlobConfig(name="b-blob", blob_bytes=4096)))
    torch.manual_seed(1)
    b = ait.Module(SleepyLinear(0.0).eval(), "b", strategy=b_strategy.enable_performance_validation(False))
    with pytest.raises(KeyboardInterrupt):
        ait.tune(b, [torch.randn(8) for _ in range(4)], batch_sizes=[1, 2], device="cpu")

    assert a.state is ModuleState.TUNED and torch.equal(_served(a), expected_a), "a stopped serving"
    assert b.state is ModuleState.RECORDING
    assert _store_files(config.cache_dir) == stored_before, "the interrupted tuning left files in the store"
    for path in stored_before:
        OpenedCheckpoint(path, "full")  # whole and valid
    leftovers = [p for p in config.cache_dir.rglob("*") if ".tmp" in p.name]
    assert not leftovers, leftovers

    ait.tune(b, [torch.randn(8) for _ in range(4)], batch_sizes=[1, 2], device="cpu")  # the next one succeeds
    assert b.state is ModuleState.TUNED and a.state is ModuleState.TUNED
    assert torch.equal(_served(a), expected_a)
    torch.testing.assert_close(_served(b), b.__wrapped__.compute(torch.ones(2, 8)))
    assert len(_store_files(config.cache_dir)) == 2


def test_ctrl_c_while_the_results_store_is_written_leaves_no_file_behind(aitune_log):
    """The interrupt arrives in the middle of writing the store file. Its temporary file must go
    at once, not when the KeyboardInterrupt's traceback is freed (a REPL keeps it in
    sys.last_traceback; so does pytest.raises here): nothing half-written, and the next tune
    stores the result."""
    from fault_backends import InterruptedStoreConfig, InterruptedWhileStoredBackend

    InterruptedWhileStoredBackend.fired.clear()
    config.device_after_tuning = "cpu"
    strategy = _first_wins(InterruptedWhileStoredBackend(InterruptedStoreConfig(blob_bytes=4096)))
    torch.manual_seed(0)
    m = ait.Module(SleepyLinear(0.0).eval(), "m", strategy=strategy.enable_performance_validation(False))
    with pytest.raises(KeyboardInterrupt) as interrupted:
        ait.tune(m, [torch.randn(8) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
    assert interrupted.value.__traceback__ is not None  # still alive, as in a REPL
    results = config.cache_dir / "results"
    assert not [p for p in results.rglob("*") if p.is_file()], list(results.rglob("*"))
    assert m.state is ModuleState.RECORDING
    ait.tune(m, [torch.randn(8) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
    [stored] = _store_files(config.cache_dir)
    OpenedCheckpoint(stored, "full")


# -- a full disk ----------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs: writes past it fail with ENOSPC, as on a full disk."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave_bytes: int) -> Path:
    """Fills `disk` until `leave_bytes` are free."""
    filler = disk / "filler"
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave_bytes))
    return filler


def test_a_full_disk_while_the_results_store_is_written_leaves_nothing_half_written(small_disk, tmp_path, aitune_log):
    """The build fits, storing its result does not: the module still serves, a warning says why,
    the store holds no partial or temporary file, and once there is space the next tune stores it."""
    config.cache_dir = small_disk
    config.tuning_data_output_path = tmp_path / "report.json"  # telemetry on another disk
    config.device_after_tuning = "cpu"
    _fill(small_disk, leave_bytes=1_500_000)
    strategy = _first_wins(BlobBackend(BlobConfig(blob_bytes=1_000_000))).enable_performance_validation(False)
    m = _tune("m", strategy)
    assert m.state is ModuleState.TUNED
    torch.testing.assert_close(_served(m), m.__wrapped__.compute(torch.ones(2, 8)))
    assert "could not be stored" in aitune_log.text and "No space left on device" in aitune_log.text
    results = small_disk / "results"
    assert not [p for p in results.rglob("*") if p.is_file()], list(results.rglob("*"))

    (small_disk / "filler").unlink()
    module_registry.clear()
    again = _tune("m", _first_wins(BlobBackend(BlobConfig(blob_bytes=1_000_000))).enable_performance_validation(False))
    assert again.state is ModuleState.TUNED
    [stored] = [p for p in results.rglob("*") if p.is_file()]
    OpenedCheckpoint(stored, "full")


def test_a_full_disk_during_a_build_fails_the_candidate_and_keeps_the_store_whole(small_disk, tmp_path, aitune_log):
    """A build whose artifact does not fit is an ordinary candidate failure (the next candidate is
    tried); no store file is written for it."""
    config.cache_dir = small_disk
    config.tuning_data_output_path = tmp_path / "report.json"
    config.device_after_tuning = "cpu"
    _fill(small_disk, leave_bytes=500_000)
    strategy = _first_wins(
        BlobBackend(BlobConfig(name="too-big", blob_bytes=2_000_000)), FakeBackend(FakeBackendConfig(name="small"))
    ).enable_performance_validation(False)
    m = _tune("m", strategy)
    assert m.tuned_module.backends[0][1].config.name == "small"
    assert "No space left on device" in strategy.backend_results[0]["error"]
    for path in (small_disk / "results").rglob("*.ait"):
        OpenedCheckpoint(path, "full")
    assert not [p for p in small_disk.rglob("*") if ".tmp" in p.name]


def test_a_full_disk_while_telemetry_is_written_raises_disk_space_error_and_keeps_the_report(small_disk, tmp_path):
    config.cache_dir = tmp_path / "cache"
    report = small_disk / "report.json"
    config.tuning_data_output_path = report
    _tune("m", _first_wins(FakeBackend(FakeBackendConfig(name="a"))).enable_performance_validation(False))
    before = report.read_text()
    _fill(small_disk, leave_bytes=0)
    module_registry.clear()
    with pytest.raises(errors.DiskSpaceError, match="No space left on device"):
        _tune("n", _first_wins(FakeBackend(FakeBackendConfig(name="b"))).enable_performance_validation(False))
    assert report.read_text() == before, "the report was replaced by a partial one"
    assert not [p for p in small_disk.iterdir() if p.name not in ("report.json", "filler", "report.html")]
    # With space again, the next ait.tune writes a whole report of its own run (the failed run
    # was left as the current one, so every later run joined it and never finished).
    (small_disk / "filler").unlink()
    module_registry.clear()
    _tune("o", _first_wins(FakeBackend(FakeBackendConfig(name="c"))).enable_performance_validation(False))
    data = json.loads(report.read_text())
    assert data["duration_s"] is not None and [m["name"] for m in data["modules"]] == ["o"], data["modules"]


def test_atomic_write_text_removes_its_temporary_file_on_enospc(small_disk):
    target = small_disk / "x.json"
    atomic_write_text(target, "old")
    _fill(small_disk, leave_bytes=0)
    with pytest.raises(OSError) as info:
        atomic_write_text(target, "x" * 1_000_000)
    assert info.value.errno == errno.ENOSPC
    assert target.read_text() == "old"
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "x.json"]


@pytest.fixture(autouse=True)
def _quiet(caplog):
    caplog.set_level(logging.INFO, logger="aitune")
