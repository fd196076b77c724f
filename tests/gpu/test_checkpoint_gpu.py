"""Save and load on a GPU for every backend that can be saved, with and without CUDA graphs
(issue 17, finding 17: a JIT backend's restore used to recompile with the stored CPU sample against
CUDA weights). Runs in `./run gpu` (pytest -m gpu)."""

from __future__ import annotations

import copy

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend import (
    TorchEagerBackend,
    TorchEagerBackendConfig,
    TorchInductorAotBackend,
    TorchInductorAotBackendConfig,
    TorchInductorJitBackend,
    TorchInductorJitBackendConfig,
)
from aitune.torch.module.state import ModuleState

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

BACKENDS = {
    "eager": lambda graphs: TorchEagerBackend(TorchEagerBackendConfig(use_cuda_graphs=graphs)),
    "inductor-jit": lambda graphs: TorchInductorJitBackend(TorchInductorJitBackendConfig(use_cuda_graphs=graphs)),
    "inductor-aot": lambda graphs: TorchInductorAotBackend(TorchInductorAotBackendConfig(use_cuda_graphs=graphs)),
}


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()


@pytest.mark.parametrize("graphs", [False, True], ids=["plain", "cuda-graphs"])
@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_round_trip_on_cuda(tmp_path, name, graphs):
    if name == "inductor-aot":
        pytest.importorskip("torch._inductor")
    model = _mlp().cuda()
    reference = copy.deepcopy(model)
    strategy = (
        ait.OneBackendStrategy(BACKENDS[name](graphs))
        .enable_performance_validation(False)
        .enable_find_max_batch_size(False)
    )
    m = ait.Module(model, f"gpu-{name}", strategy=strategy)
    ait.tune(m, [torch.randn(32) for _ in range(4)], batch_sizes=[1, 2, 4], device="cuda:0")
    assert m.state is ModuleState.TUNED
    path = ait.save(m, tmp_path / f"{name}.ait")

    loaded = ait.load(_mlp().cuda(), path)
    [(_, backend)] = loaded.tuned_module.backends
    assert bool(backend.config.use_cuda_graphs) is graphs
    for bs in (1, 3, 4):
        x = torch.randn(bs, 32, device="cuda")
        with torch.no_grad():
            torch.testing.assert_close(loaded(x), reference(x), atol=1e-3, rtol=1e-3)
    if graphs:
        assert backend.cuda_graphs.stats()["captures"] >= 1
