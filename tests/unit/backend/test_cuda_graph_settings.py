"""The CUDA-graph runner's cache size and output cloning are fixed when a backend starts serving
(docs/reference/dispatch.md#cuda-graph-runner): re-activating it later (ait.tune activates every tuned module, also ones
tuned earlier) keeps them, even when aitune.torch.config changed in between."""

from __future__ import annotations

import torch

import aitune.torch as ait
from aitune.torch.backend import TorchEagerBackend, TorchEagerBackendConfig
from aitune.torch.config import config


def test_reactivation_keeps_the_settings_the_runner_started_with(monkeypatch, cpu_eager_strategy):
    model = torch.nn.Sequential(torch.nn.Linear(6, 3)).eval()
    wrapped = ait.Module(model, "graph-settings", strategy=cpu_eager_strategy)
    ait.tune(wrapped, [torch.randn(6) for _ in range(2)], device="cpu")
    backend = TorchEagerBackend(TorchEagerBackendConfig(use_cuda_graphs=True))
    backend._graph_spec = wrapped.graph_specs[0]  # what build() sets; building needs a CUDA device

    monkeypatch.setattr(config, "cuda_graph_clone_outputs", False)
    monkeypatch.setattr(config, "cuda_graph_cache_size", 3)
    backend.cuda_graphs.start()
    first = backend.cuda_graphs.serving.runner
    assert (first.clone_outputs, first.cache_size) == (False, 3)

    monkeypatch.setattr(config, "cuda_graph_clone_outputs", True)
    monkeypatch.setattr(config, "cuda_graph_cache_size", 8)
    backend.cuda_graphs.start()  # what activate() does after a deactivate()
    again = backend.cuda_graphs.serving.runner
    assert again is not first
    assert (again.clone_outputs, again.cache_size) == (False, 3)

    fresh = TorchEagerBackend(TorchEagerBackendConfig(use_cuda_graphs=True))
    fresh._graph_spec = wrapped.graph_specs[0]
    fresh.cuda_graphs.start()
    assert (fresh.cuda_graphs.serving.runner.clone_outputs, fresh.cuda_graphs.serving.runner.cache_size) == (True, 8)
