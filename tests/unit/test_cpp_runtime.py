"""End-to-end tests of the pure-C++ runtime through the `aitune` CLI (SPEC §11)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend import TorchEagerBackend, TorchInductorAotBackend


def _cli() -> str:
    found = shutil.which("aitune")
    if found:
        return found
    built = Path("/tmp/full-build/cpp/cli/aitune")
    if built.is_file():
        return str(built)
    pytest.skip("the aitune CLI is not built (neither on PATH nor in /tmp/full-build/cpp/cli)")


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def _tune_and_save(backend, path: Path) -> Path:
    m = ait.Module(_mlp(), "mlp", strategy=ait.OneBackendStrategy(backend).enable_performance_validation(False)
                   .enable_find_max_batch_size(False))
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2, 4], device="cpu")
    return ait.save(m, path)


@pytest.fixture(scope="module")
def aot_ckpt(tmp_path_factory, aoti_loads):
    return _tune_and_save(TorchInductorAotBackend(), tmp_path_factory.mktemp("aot") / "aot.ait")


def _run(*args, cache: Path):
    env = dict(os.environ, AITUNE_CACHE_DIR=str(cache))
    return subprocess.run([_cli(), *map(str, args)], capture_output=True, text=True, errors="replace", env=env,
                          timeout=300)


def _stored_sample(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    from aitune._native import _C
    from safetensors.torch import load as load_safetensors

    reader = _C.ArchiveReader(str(path))
    manifest = json.loads(reader.manifest())
    records = {r["path"]: r for r in manifest["files"]}
    prefix = manifest["modules"][0]["graphs"][0]["samples"][0]
    tensors = load_safetensors(reader.read(prefix + ".safetensors", records[prefix + ".safetensors"]))
    skeleton = json.loads(reader.read(prefix + ".json", records[prefix + ".json"]))
    return tensors[skeleton["args"]["tuple"][0]["tensor"]], tensors[skeleton["reference_output"]["tensor"]]


def test_inspect_names_graph_and_native(aot_ckpt, tmp_path):
    r = _run("inspect", aot_ckpt, cache=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "graph '0'" in r.stdout and "native" in r.stdout and "input_input" in r.stdout
    r = _run("inspect", aot_ckpt, "--json", "--verify", "full", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["modules"][0]["graphs"][0]["verdict"] == "native"


def test_run_check_matches_python(aot_ckpt, tmp_path):
    from safetensors.torch import load_file, save_file

    out = tmp_path / "out.safetensors"
    r = _run("run", aot_ckpt, "--device", "cpu", "--outputs", out, "--check", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    x, reference = _stored_sample(aot_ckpt)
    loaded = ait.load(_mlp(), aot_ckpt)
    with torch.no_grad():
        expected = loaded(x)
    got = load_file(str(out))["output"]
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got, reference, atol=1e-5, rtol=1e-4)

    # The same through --inputs, naming the tensor by its input_<path> name, at another batch size.
    x3 = torch.randn(3, 6)
    save_file({"input_input": x3}, str(tmp_path / "in.safetensors"))
    r = _run("run", aot_ckpt, "--device", "cpu", "--inputs", tmp_path / "in.safetensors", "--outputs", out,
             cache=tmp_path)
    assert r.returncode == 0, r.stderr
    with torch.no_grad():
        torch.testing.assert_close(load_file(str(out))["output"], loaded(x3))


def test_input_outside_profile_exits_7(aot_ckpt, tmp_path):
    from safetensors.torch import save_file

    save_file({"input_input": torch.randn(9, 6)}, str(tmp_path / "big.safetensors"))
    r = _run("run", aot_ckpt, "--device", "cpu", "--inputs", tmp_path / "big.safetensors", cache=tmp_path)
    assert r.returncode == 7, r.stderr
    assert "exceeds max profile shape" in r.stderr
    save_file({"nope": torch.randn(2, 6)}, str(tmp_path / "unknown.safetensors"))
    r = _run("run", aot_ckpt, "--device", "cpu", "--inputs", tmp_path / "unknown.safetensors", cache=tmp_path)
    assert r.returncode == 7, r.stderr


def test_flipped_byte_exits_3(aot_ckpt, tmp_path):
    data = bytearray(aot_ckpt.read_bytes())
    data[-200] ^= 0xFF  # inside the central directory / end records or the last entry
    bad = tmp_path / "bad.ait"
    bad.write_bytes(bytes(data))
    r = _run("run", bad, "--device", "cpu", cache=tmp_path)
    assert r.returncode == 3, (r.returncode, r.stderr)
    # A flipped byte inside the package is caught by its SHA-256 on extraction.
    data = bytearray(aot_ckpt.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    r = _run("run", bad, "--device", "cpu", cache=tmp_path / "fresh")
    assert r.returncode == 3, (r.returncode, r.stderr)


def test_jit_only_checkpoint_needs_python(tmp_path):
    path = _tune_and_save(TorchEagerBackend(), tmp_path / "eager.ait")
    r = _run("run", path, "--device", "cpu", cache=tmp_path)
    assert r.returncode == 5, r.stderr
    assert "needs Python" in r.stderr
    r = _run("inspect", path, cache=tmp_path)
    assert r.returncode == 0 and "python-only" in r.stdout


def test_bench_json(aot_ckpt, tmp_path):
    r = _run("bench", aot_ckpt, "--device", "cpu", "--iterations", "5", "--warmup", "2", "--json", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["host_latency_ms_median"] > 0 and result["num_measured_calls"] == 5
    r = _run("bench", aot_ckpt, "--device", "cpu", "--iterations", "3", "--warmup", "1", "--batch-size", "3",
             "--json", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["batch_size"] == 3
    # A CPU package never runs through CUDA graphs, whatever the flag says.
    r = _run("bench", aot_ckpt, "--device", "cpu", "--iterations", "2", "--cuda-graphs", "on", "--json", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cuda_graphs"] is None
    r = _run("bench", aot_ckpt, "--device", "cpu", "--iterations", "2", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "CUDA graphs: off" in r.stdout


def test_usage_errors_exit_2(tmp_path):
    assert _run("run", cache=tmp_path).returncode == 2
    assert _run("bench", "x.ait", "--iterations", "abc", cache=tmp_path).returncode == 2
    for command in ("run", "bench"):
        r = _run(command, "x.ait", "--cuda-graphs", "sometimes", cache=tmp_path)
        assert r.returncode == 2
        assert "--cuda-graphs takes on, off or auto, got 'sometimes'" in r.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graphs_in_the_cpp_runtime(tmp_path, aoti_loads):
    """SPEC §11.1: CUDA graphs as saved (use_cuda_graphs), or forced on/off by the caller; the
    counters show the replays, and the outputs still match the stored eager reference."""
    from aitune.torch.backend import TorchInductorAotBackendConfig

    m = ait.Module(_mlp().cuda(), "mlp", strategy=ait.OneBackendStrategy(
        TorchInductorAotBackend(TorchInductorAotBackendConfig(use_cuda_graphs=True)))
        .enable_performance_validation(False).enable_find_max_batch_size(False))
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2, 4], device="cuda:0")
    ckpt = ait.save(m, tmp_path / "graphs.ait")
    r = _run("bench", ckpt, "--device", "0", "--iterations", "20", "--warmup", "3", "--json", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    counters = json.loads(r.stdout)["cuda_graphs"]
    assert counters["captures"] == 1 and counters["hits"] >= 22 and counters["direct_calls"] == 0
    r = _run("bench", ckpt, "--device", "0", "--iterations", "5", "--cuda-graphs", "off", "--json", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cuda_graphs"] is None
    r = _run("run", ckpt, "--device", "0", "--check", cache=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
