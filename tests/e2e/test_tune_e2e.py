"""End-to-end tuning through ait.tune with the eager backend (docs/reference/tuning.md,
docs/reference/backends.md#per-backend-behaviour, docs/reference/strategies.md)."""

from __future__ import annotations

import copy
import json
import logging
import os
import re

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend import Backend, TorchEagerBackend, TorchEagerBackendConfig
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.head = torch.nn.Linear(8, 4)

    def forward(self, image):
        return self.head(self.features(image).flatten(1))


MODELS = {
    "mlp": (_mlp, (6,)),
    "convnet": (lambda: ConvNet().eval(), (3, 8, 8)),
}


def _dataset(shape, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g) for _ in range(n)]


def _model_and_reference(factory):
    torch.manual_seed(0)
    model = factory()
    reference = copy.deepcopy(model)
    return model, reference


class TwoRanks(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(5, 2)

    def forward(self, x):
        return self.linear(x)


class FailingBackend(Backend):
    """Writes to file descriptors 1 and 2, as native libraries and compilers do (to check the
    build-output capture), and fails its build."""

    def _build(self, module, graph_spec, data, device, cache_dir):
        os.write(1, b"fake backend build output\n")
        os.write(2, b"fake backend build warning\n")
        raise RuntimeError("fake backend build failure")

    def _infer(self, *args, **kwargs):  # pragma: no cover - never built
        raise AssertionError("a failed backend must not serve calls")


@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_tuned_outputs_equal_eager(model_name, cpu_eager_strategy):
    factory, sample_shape = MODELS[model_name]
    model, reference = _model_and_reference(factory)
    m = ait.Module(model, model_name, strategy=cpu_eager_strategy)
    ait.tune(m, _dataset(sample_shape), batch_sizes=[1, 2], device="cpu")
    assert m.state is ModuleState.TUNED
    assert m.device == torch.device("cpu")
    [(graph, backend)] = m.tuned_module.backends
    assert graph.name == "0"
    assert isinstance(backend, TorchEagerBackend)
    assert backend is not cpu_eager_strategy.backend  # a built deep copy of the blueprint
    for bs in (1, 2, 5):
        x = torch.randn(bs, *sample_shape)
        with torch.no_grad():
            expected = reference(x)
            assert torch.equal(m(x), expected)
            assert torch.equal(model(x), expected)  # calls through the original object too


def test_candidate_build_folder(cpu_eager_strategy):
    m = ait.Module(_mlp(), "mlp", strategy=cpu_eager_strategy)
    ait.tune(m, _dataset((6,)), device="cpu")
    graph_dir = config.cache_dir / "mlp" / "0"
    [build_dir] = [p for p in graph_dir.iterdir() if p.is_dir()]
    assert re.fullmatch(r"TorchEagerBackend_[0-9a-f]{64}", build_dir.name)
    assert build_dir.name == cpu_eager_strategy.backend.key()
    config_json = json.loads((build_dir / "config.json").read_text())
    assert config_json == {"autocast_enabled": False, "autocast_dtype": None, "use_cuda_graphs": False}
    log = build_dir / "build.log"
    assert not log.exists() or "Traceback" not in log.read_text()


def test_tuning_log(aitune_log, cpu_eager_strategy):
    m = ait.Module(_mlp(), "mlp", strategy=cpu_eager_strategy)
    ait.tune(m, _dataset((6,)), device="cpu")
    text = "\n".join(aitune_log.messages)
    for line in [
        "🎯 Tuning module: `mlp` (all graphs)",
        "🚀 Tuning graph `0` for module `mlp`:",
        "graph_spec:",
        "input_spec:",
        "output_spec:",
        "🤖 backend: TorchEagerBackend()",
        "✅ backend built",
        "✅ backend validated",
        "✅ Tuning module: `mlp` completed.",
        "✅ Completed tuning all modules.",
        "🎯 Activating tuned modules for inference:",
        "📦 module: mlp",
        "backend: TorchEagerBackend()",
    ]:
        assert line in text, line
    graph_block = next(msg for msg in aitune_log.messages if msg.startswith("🚀 Tuning graph `0`"))
    assert "Access Path" in graph_block and "Semantic Path" in graph_block and "Dtype" in graph_block
    assert "['batch0', 6]" in graph_block
    assert "╒" in graph_block and "╞" in graph_block and "╘" in graph_block
    # The strategy as AITune describes it (docs/guide.md, "Coming from AITune").
    assert "    name: One Backend Strategy\n    description: Use only one backend\n" in graph_block
    assert text.index("🚀 Tuning graph") < text.index("✅ backend built") < text.index("📦 module: mlp")


class _ChattyMlp(torch.nn.Module):
    """Logs through a third-party logger on every forward, as libraries under tuning do."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(6, 3)

    def forward(self, x):
        logging.getLogger("thirdparty.lib").warning("external chatter")
        return self.linear(x)


def test_disable_external_logging_silences_others_but_not_aitune(aitune_log, cpu_eager_strategy):
    root_level = logging.root.level
    m = ait.Module(_ChattyMlp().eval(), "chatty", strategy=cpu_eager_strategy)
    ait.tune(m, _dataset((6,)), device="cpu", disable_external_logging=True)
    assert "✅ Completed tuning all modules." in aitune_log.messages
    assert "external chatter" not in aitune_log.messages
    assert logging.root.level == root_level
    logging.getLogger("thirdparty.lib").warning("after tuning")  # levels are restored afterwards
    assert "after tuning" in aitune_log.messages


def test_module_with_two_graphs_gets_two_backends(cpu_eager_strategy):
    torch.manual_seed(0)
    model = TwoRanks().eval()
    reference = copy.deepcopy(model)
    m = ait.Module(model, "two", strategy=cpu_eager_strategy)

    def func(x):
        m(x)
        m(x.unsqueeze(1).expand(-1, 3, -1))

    ait.tune(func, _dataset((5,)), device="cpu")
    assert m.state is ModuleState.TUNED
    backends = m.tuned_module.backends
    assert [g.name for g, _ in backends] == ["0", "1"]
    assert backends[0][1] is not backends[1][1]
    assert sorted(p.name for p in (config.cache_dir / "two").iterdir()) == ["0", "1"]
    for x in (torch.randn(4, 5), torch.randn(4, 7, 5)):
        with torch.no_grad():
            assert torch.equal(m(x), reference(x))


def test_autocast_bf16_returns_eager_dtype():
    backend = TorchEagerBackend(TorchEagerBackendConfig(autocast_enabled=True, autocast_dtype=torch.bfloat16))
    model, reference = _model_and_reference(_mlp)
    m = ait.Module(model, "auto", strategy=ait.OneBackendStrategy(backend))
    ait.tune(m, _dataset((6,)), device="cpu")
    assert m.state is ModuleState.TUNED
    x = torch.randn(3, 6)
    with torch.no_grad():
        out = m(x)
        expected = reference(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, atol=5e-2, rtol=5e-2)


def test_failing_backend_leaves_module_in_passthrough(aitune_log):
    model, reference = _model_and_reference(_mlp)
    blueprint = FailingBackend()
    m = ait.Module(model, "failing", strategy=ait.OneBackendStrategy(blueprint))
    ait.tune(m, _dataset((6,)), device="cpu")  # ignore_failing_modules=True by default
    assert m.state is ModuleState.PASSTHROUGH
    x = torch.randn(3, 6)
    with torch.no_grad():
        assert torch.equal(m(x), reference(x))
    [build_dir] = [
        p for p in (config.cache_dir / "failing" / "0").iterdir() if p.is_dir() and p.name.startswith("FailingBackend_")
    ]
    assert build_dir.name == blueprint.key()
    log = (build_dir / "build.log").read_text()
    assert "fake backend build output" in log  # build output goes to build.log
    assert "fake backend build warning" in log
    assert "Traceback" in log and "RuntimeError: fake backend build failure" in log
    assert any(
        msg.startswith("❌ backend failed (log file:") and str(build_dir / "build.log") in msg
        for msg in aitune_log.messages
    )
    assert any(
        r.levelname == "WARNING" and "⚠️ Tuning module: `failing` failed" in r.getMessage() for r in aitune_log.records
    )
    assert "  ➤ tuning failed: using original module" in "\n".join(aitune_log.messages)


def test_failing_backend_reraises_when_not_ignoring():
    m = ait.Module(_mlp(), "failing", strategy=ait.OneBackendStrategy(FailingBackend()))
    with pytest.raises(RuntimeError, match="fake backend build failure"):
        ait.tune(m, _dataset((6,)), device="cpu", ignore_failing_modules=False)
    assert m.state is ModuleState.RECORDING


def test_dry_run_builds_nothing(aitune_log, cpu_eager_strategy):
    m = ait.Module(_mlp(), "mlp", strategy=cpu_eager_strategy)
    ait.tune(m, _dataset((6,)), device="cpu", dry_run=True)
    assert m.state is ModuleState.RECORDING
    assert m.tuned_module is None
    built = list(config.cache_dir.glob("mlp/*/TorchEagerBackend_*"))
    assert built == []
    assert any(msg.startswith("🚀 Tuning graph `0` for module `mlp` (DRY RUN):") for msg in aitune_log.messages)
    assert "✅ backend built" not in aitune_log.messages
    assert len(m.graph_specs) == 1 and m.graph_specs[0].num_calls > 0


def test_tuning_twice_raises(cpu_eager_strategy):
    m = ait.Module(_mlp(), "x", strategy=cpu_eager_strategy)
    ait.tune(m, _dataset((6,)), device="cpu")
    assert m.state is ModuleState.TUNED
    with pytest.raises(ValueError) as info:
        m.tune(device="cpu")
    assert str(info.value) == "Module: 'x' has already been tuned. Reset it to do it again."
    assert m.state is ModuleState.TUNED


def test_tuning_without_samples_raises(cpu_eager_strategy):
    m = ait.Module(_mlp(), "x", strategy=cpu_eager_strategy)
    with pytest.raises(ValueError) as info:
        m.tune(device="cpu")
    assert str(info.value) == "Module: 'x' has not recorded any samples. Cannot tune it."


def test_ait_tune_puts_a_module_without_samples_into_passthrough(cpu_eager_strategy):
    used = ait.Module(_mlp(), "used", strategy=cpu_eager_strategy)
    unused = ait.Module(_mlp(), "x", strategy=ait.OneBackendStrategy(TorchEagerBackend()))
    ait.tune(used, _dataset((6,)), device="cpu")
    assert used.state is ModuleState.TUNED
    assert unused.state is ModuleState.PASSTHROUGH


def test_ait_tune_reraises_a_module_without_samples(cpu_eager_strategy):
    ait.Module(_mlp(), "x", strategy=cpu_eager_strategy)
    with pytest.raises(ValueError, match=r"^Module: 'x' has not recorded any samples\. Cannot tune it\.$"):
        ait.tune(lambda x: None, _dataset((6,)), device="cpu", ignore_failing_modules=False)


def test_explicit_tune_strategy_wins_over_module_strategy():
    m = ait.Module(_mlp(), "m", strategy=ait.OneBackendStrategy(FailingBackend()))
    with torch.no_grad():
        m(torch.randn(1, 6))
    m.tune(device="cpu", strategy=ait.OneBackendStrategy(TorchEagerBackend()))
    assert m.state is ModuleState.TUNED
    assert isinstance(m.tuned_module.backends[0][1], TorchEagerBackend)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_tune_on_cuda_equals_eager(model_name):
    factory, sample_shape = MODELS[model_name]
    model, reference = _model_and_reference(factory)
    model, reference = model.to("cuda:0"), reference.to("cuda:0")
    m = ait.Module(model, model_name, strategy=ait.OneBackendStrategy(TorchEagerBackend()))
    ait.tune(m, [x.to("cuda:0") for x in _dataset(sample_shape)], batch_sizes=[1, 2], device="cuda:0")
    assert m.state is ModuleState.TUNED
    assert m.device == torch.device("cuda:0")
    for bs in (1, 2, 5):
        x = torch.randn(bs, *sample_shape, device="cuda:0")
        with torch.no_grad():
            out = m(x)
            expected = reference(x)
        assert out.device == expected.device
        assert torch.equal(out, expected)
