"""TorchAOBackend on a GPU (docs/reference/backends.md#torchao-torchaobackend): per preset int8wo,
int8dq, fp8wo and fp8dq a build served through aitune's CUDA-graph runner, its error against
eager inside the preset's class, a save without pickle and a load that quantizes again to the same
digest and the same outputs; the MX presets' refusal below Blackwell. Runs in `./run gpu`
(pytest -m gpu); mode="default" keeps each compile to seconds (the whole file: about 2 minutes on an
H200)."""

from __future__ import annotations

import copy
import json
import zipfile

import pytest
import torch

import aitune.torch as ait
from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend import TorchAOBackend, TorchAOBackendConfig
from aitune.torch.backend.backend import availability
from aitune.torch.backend.torchao.torchao_config import SAVED_STATE_KEY
from aitune.torch.module.state import ModuleState

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
torchao = pytest.importorskip("torchao", reason="torchao is not installed (the GPU run installs the carried wheel)")

FP8_CAPABLE = torch.cuda.is_available() and torch.cuda.get_device_capability(0) >= (8, 9)


class Block(torch.nn.Module):
    """A transformer MLP block: Linear dims multiples of 16, as fp8 matmuls need."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(256)
        self.up = torch.nn.Linear(256, 1024)
        self.down = torch.nn.Linear(1024, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def _block() -> torch.nn.Module:
    torch.manual_seed(0)
    return Block().eval().cuda().to(torch.bfloat16)


def _rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


@pytest.mark.parametrize("preset", ["int8wo", "int8dq", "fp8wo", "fp8dq"])
def test_preset_builds_serves_through_cuda_graphs_and_round_trips(preset, tmp_path):
    if preset == "fp8dq" and not FP8_CAPABLE:
        pytest.skip("fp8dq needs compute capability 8.9 or newer")
    model = _block()
    reference = copy.deepcopy(model)
    config = TorchAOBackendConfig(quantization=preset, mode="default", use_cuda_graphs=True)
    strategy = ait.OneBackendStrategy(TorchAOBackend(config)).enable_find_max_batch_size(False)
    strategy.enable_performance_validation(False)
    m = ait.Module(model, f"block-{preset}", strategy=strategy)
    # 32 rows per matmul: int8dq's int8 GEMM (torch._int_mm) refuses 16 rows or fewer on CUDA.
    dataset = [torch.randn(32, 256, dtype=torch.bfloat16) for _ in range(2)]
    ait.tune(m, dataset, batch_sizes=[1, 2], device="cuda:0")
    assert m.state is ModuleState.TUNED
    [(_, backend)] = m.tuned_module.backends
    assert backend.validated_precision["precision_class"] == ("int8" if preset.startswith("int8") else "fp8")

    x = torch.randn(2, 32, 256, dtype=torch.bfloat16, device="cuda")
    with torch.no_grad():
        tuned, eager = m(x), reference(x)
    stats = backend.cuda_graphs.stats()
    assert stats is not None and stats["captures"] >= 1, stats
    error = _rel_l2(tuned, eager)
    assert 0 < error < 0.1, error  # quantized, and inside the int8/fp8 class's rel_l2 bound

    path = ait.save(m, tmp_path / f"{preset}.ait")
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            assert name.endswith((".json", ".safetensors")), name
            assert not archive.read(name).startswith(b"\x80"), name  # no pickle protocol header
        entry = json.loads(archive.read("manifest.json"))["modules"][0]["graphs"][0]["backend"]
    assert entry["name"] == "torchao" and entry["config"][SAVED_STATE_KEY]["modules"] == 2

    loaded = ait.load(_block(), path)
    [(_, again)] = loaded.tuned_module.backends
    assert again.quantized_digest().sha256 == entry["config"][SAVED_STATE_KEY]["sha256"]
    assert again.cuda_graphs.requested
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), tuned, rtol=2e-2, atol=2e-2)


def test_mx_presets_below_blackwell_name_the_compute_capability(tmp_path):
    capability = torch.cuda.get_device_capability(0)
    if capability >= (10, 0):
        pytest.skip(f"this GPU (sm_{capability[0]}{capability[1]}) runs the MX formats")
    for preset in ("mxfp8dq", "nvfp4dq"):
        backend = TorchAOBackend(TorchAOBackendConfig(quantization=preset, mode="default"))
        ok, reason = availability(backend, torch.device("cuda:0"))
        assert not ok
        assert f"{preset} needs an NVIDIA GPU of compute capability 10.0 (sm_100, Blackwell) or newer" in reason
        assert f"has compute capability {capability[0]}.{capability[1]}" in reason
        with pytest.raises(BackendUnavailableError, match="sm_100"):
            backend.build(_block(), None, [], "cuda:0", tmp_path)
