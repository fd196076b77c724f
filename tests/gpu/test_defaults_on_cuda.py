"""The defaults on a GPU (issue 12), with the real CUDA-graph runner: `ait.tune` with no options
picks a CUDA-graph candidate for a launch-bound model, and a forward that syncs with the host
(which no CUDA graph can capture) falls back to a candidate without CUDA graphs, saying why once."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import aitune.torch as ait
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


class SmallMlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(6)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x).relu()


class HostSync(SmallMlp):
    """Reads a value back to the host in forward: CUDA-graph capture fails, plain calls work."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.layers(x)
        return y * float(y.abs().max().item() > 0)


def _tune(model: torch.nn.Module, name: str) -> ait.Module:
    m = ait.Module(model.cuda().eval(), name)
    ait.tune(m, [torch.randn(64) for _ in range(4)])  # the README's two lines: no options
    return m


@pytest.mark.gpu
@cuda_only
def test_defaults_pick_a_cuda_graph_candidate_for_a_launch_bound_model():
    model = SmallMlp()
    reference = copy.deepcopy(model).cuda()
    m = _tune(model, "mlp")
    assert m.state is ModuleState.TUNED
    [(_, backend)] = m.tuned_module.backends
    assert backend.config.use_cuda_graphs, backend.describe()
    x = torch.randn(1, 64, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(m(x), reference(x), atol=1e-2, rtol=1e-2)
    graph = json.loads(config.tuning_data_output_path.read_text())["modules"][0]["graphs"][0]
    assert graph["outcome"] == "tuned"
    assert [r["batch_size"] for r in graph["baseline_measurements"]] == [1, 2], "the gate measured at [1, 2]"


@pytest.mark.gpu
@cuda_only
def test_a_forward_that_syncs_with_the_host_falls_back_without_cuda_graphs(aitune_log):
    model = HostSync()
    reference = copy.deepcopy(model).cuda()
    m = _tune(model, "sync")
    text = aitune_log.text
    # The first Inductor candidate (freezing, CUDA graphs) fails its capture; so does the next one.
    assert "CudaGraphCaptureError: CUDA graph capture failed for TorchInductorJitBackend(use_cuda_graphs=True" in text
    if m.state is ModuleState.TUNED:
        [(_, backend)] = m.tuned_module.backends
        assert not backend.config.use_cuda_graphs, backend.describe()
        assert backend.cuda_graphs.capture_failure() is None
    else:  # nothing without CUDA graphs beat eager: kept eager, plainly
        assert "🟰 sync.0: kept eager" in text
    x = torch.randn(2, 64, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(m(x), reference(x), atol=1e-2, rtol=1e-2)
