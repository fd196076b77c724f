"""Torch-TensorRT candidates that came back as PyTorch are not measured as TensorRT
(docs/reference/backends.md#per-backend-behaviour): with pass_through_build_failures=False (Torch-TensorRT's default) a
failed engine build returns the graph itself, and partitioning can leave TensorRT nothing. The
fake of tests/fakes/fake_torch_tensorrt.py does what 2.11 does (the conformance tier checks the
real library's fallback and its engine module names)."""

from __future__ import annotations

import logging

import fake_torch_tensorrt
import pytest
import torch

import aitune.torch as ait
from aitune.torch.global_context import published_batch_size
from aitune.torch.backend import (
    TorchTensorRTAotBackend,
    TorchTensorRTAotBackendConfig,
    TorchTensorRTConfig,
    TorchTensorRTJitBackend,
    TorchTensorRTJitBackendConfig,
)
from aitune.torch.backend.common import torch_tensorrt_config


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def _dataset() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(6, generator=g) for _ in range(4)]


def _tune(backend) -> ait.Module:
    strategy = ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)
    m = ait.Module(_mlp(), "mlp", strategy=strategy)
    ait.tune(m, _dataset(), batch_sizes=[1, 2], device="cpu")
    return m


def _build(backend, tmp_path):
    """backend.build on a recorded graph of the MLP (what a strategy does for a candidate)."""
    m = ait.Module(_mlp(), "mlp")
    with torch.no_grad(), published_batch_size(2):
        m(torch.randn(2, 6))
    graph = m.graph_specs[0]
    return backend.build(_mlp(), graph, graph.samples, "cpu", tmp_path)


@pytest.fixture
def fake_trt(monkeypatch):
    trt = fake_torch_tensorrt.install(monkeypatch)
    monkeypatch.setattr(TorchTensorRTJitBackend, "_devices", ("cpu", "cuda"))
    monkeypatch.setattr(TorchTensorRTAotBackend, "_devices", ("cpu", "cuda"))
    return trt


@pytest.fixture
def builds_fail(monkeypatch):
    monkeypatch.setattr(fake_torch_tensorrt, "ENGINE_BUILDS_FAIL", True)


def test_a_jit_build_whose_engines_fell_back_to_pytorch_is_refused(fake_trt, builds_fail, tmp_path):
    backend = TorchTensorRTJitBackend(TorchTensorRTJitBackendConfig())
    with pytest.raises(RuntimeError, match=r"built no TensorRT engine for graph .*all 1 graph\(s\) .* run in PyTorch"):
        _build(backend, tmp_path)
    assert backend.engine_coverage == torch_tensorrt_config.EngineCoverage(graphs=1, engines=0, pytorch_graphs=1)


def test_a_jit_build_with_engines_reports_them(fake_trt):
    m = _tune(TorchTensorRTJitBackend(TorchTensorRTJitBackendConfig()))
    [(_, built)] = m.tuned_module.backends  # tuned with it: not refused
    assert built.engine_coverage.engines >= 1 and built.engine_coverage.pytorch_graphs == 0


def test_an_aot_program_without_engines_is_refused_before_it_is_saved(fake_trt, builds_fail, tmp_path):
    backend = TorchTensorRTAotBackend(TorchTensorRTAotBackendConfig(compile_config=TorchTensorRTConfig()))
    with pytest.raises(RuntimeError, match="built no TensorRT engine"):
        _build(backend, tmp_path)
    assert fake_torch_tensorrt.calls_named(fake_trt, "dynamo.compile") and not fake_torch_tensorrt.calls_named(
        fake_trt, "save"
    )


def test_pytorch_partitions_next_to_engines_are_logged_not_refused(caplog):
    graph = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    graph.add_module("_run_on_acc_0", fake_torch_tensorrt.FakeTorchTensorRTModule())
    graph.add_module("_run_on_gpu_1", torch.nn.Identity())
    coverage = torch_tensorrt_config.EngineCoverage()
    coverage.add(graph)
    coverage.add(torch.fx.symbolic_trace(torch.nn.ReLU()))  # a Dynamo graph that came back without engines
    with caplog.at_level(logging.WARNING, logger="aitune"):
        logging.getLogger("aitune").addHandler(caplog.handler)
        try:
            coverage.check("torch_tensorrt_jit", "g")
        finally:
            logging.getLogger("aitune").removeHandler(caplog.handler)
    assert coverage == torch_tensorrt_config.EngineCoverage(graphs=2, engines=1, pytorch_graphs=1, pytorch_parts=1)
    assert "1 of 2 compiled graph(s) and 1 partition(s) run in PyTorch" in caplog.text


def test_only_torch_tensorrt_engine_modules_count_as_engines():
    class TorchTensorRTModule(torch.nn.Module):  # a user's class of the same name is no engine
        pass

    holder = torch.nn.Module()
    holder.add_module("mine", TorchTensorRTModule())
    assert torch_tensorrt_config.tensorrt_engine_count(holder) == 0
    holder.add_module("engine", fake_torch_tensorrt.FakeTorchTensorRTModule())
    assert torch_tensorrt_config.tensorrt_engine_count(holder) == 1
    assert torch_tensorrt_config.tensorrt_engine_count(lambda x: x) == 0  # a plain callable: no engine either
