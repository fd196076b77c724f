"""Every snippet of the Torch-TensorRT JIT guide (seed 004), run as written (docs/reference/api.md#backend-classes,
docs/reference/backends.md#per-backend-behaviour).

The guide's imports, config constructions and strategy constructions run everywhere: the
backends never fail to construct without Torch-TensorRT or CUDA. The calls that build a
Torch-TensorRT engine (`ait.tune` with a Torch-TensorRT backend) and the snippets that import
`torch_tensorrt` itself run as written only where the library and CUDA are present; elsewhere
they are skipped with the reason. The quick start also runs on the CPU against the recording fake
of tests/fakes/fake_torch_tensorrt.py, to show the snippet's flow works through aitune's glue."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import aitune
import fake_torch_tensorrt
from aitune.torch.backend.common import torch_tensorrt_config as trt_config
from aitune.torch.module.state import ModuleState

HAS_TRT = trt_config.import_torch_tensorrt() is not None
TRT_AND_CUDA = HAS_TRT and torch.cuda.is_available()
NO_TRT_REASON = (
    "torch_tensorrt is not installed (it cannot be installed on this host): the snippet imports it or "
    "builds a Torch-TensorRT engine"
)
needs_trt = pytest.mark.skipif(not HAS_TRT, reason=NO_TRT_REASON)
needs_trt_and_cuda = pytest.mark.skipif(not TRT_AND_CUDA, reason=NO_TRT_REASON + " on a CUDA device")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()


def _input_data() -> list[torch.Tensor]:
    return [torch.randn(8) for _ in range(4)]


def _jit_config_or_skip():
    try:
        from aitune.torch import jit_config
    except ImportError as e:
        pytest.skip(
            f"`from aitune.torch import jit_config` does not work yet (JIT tuning, aitune.torch.jit, is "
            f"being written): {e}"
        )
    return jit_config


# -- Quick Start -----------------------------------------------------------------------------------
def _quick_start(model, input_data, **tune_kwargs):
    """The Quick Start snippet; `tune_kwargs` only for the CPU run against the fake."""
    from aitune.torch.backend import TorchTensorRTConfig, TorchTensorRTJitBackend, TorchTensorRTJitBackendConfig
    import aitune.torch as ait
    import torch  # noqa: F401, F811 - as in the guide

    # Configure backend
    config = TorchTensorRTJitBackendConfig(
        compile_config=TorchTensorRTConfig(),
    )
    backend = TorchTensorRTJitBackend(config)

    # Use in tuning
    strategy = ait.OneBackendStrategy(backend=backend)

    model = ait.Module(model, "my-model", strategy=strategy)
    ait.tune(model, input_data, **tune_kwargs)
    return model, strategy


def test_quick_start_constructs_without_torch_tensorrt():
    from aitune.torch.backend import TorchTensorRTConfig, TorchTensorRTJitBackend, TorchTensorRTJitBackendConfig
    import aitune.torch as ait

    config = TorchTensorRTJitBackendConfig(
        compile_config=TorchTensorRTConfig(),
    )
    backend = TorchTensorRTJitBackend(config)
    strategy = ait.OneBackendStrategy(backend=backend)
    model = ait.Module(_model(), "my-model", strategy=strategy)
    assert strategy.backend is backend and backend.config is config
    assert isinstance(config.compile_config, TorchTensorRTConfig)
    assert model.name == "my-model" and model.state is ModuleState.INIT


@needs_trt_and_cuda
def test_quick_start_tunes_as_written():
    model, _ = _quick_start(_model(), _input_data())
    assert model.state is ModuleState.TUNED


def test_quick_start_tunes_through_the_glue_against_the_fake_library(monkeypatch):
    from aitune.torch.backend import TorchTensorRTJitBackend

    trt = fake_torch_tensorrt.install(monkeypatch)
    monkeypatch.setattr(TorchTensorRTJitBackend, "_devices", ("cpu", "cuda"))  # the real one needs CUDA
    original = _model()
    reference = _model()
    model, strategy = _quick_start(original, _input_data(), device="cpu")
    if model.state is ModuleState.PASSTHROUGH:  # below the eager gate on a tiny CPU model: served eagerly
        assert strategy.perf_validation_results
    else:
        assert model.state is ModuleState.TUNED
    assert fake_torch_tensorrt.calls_named(trt, "torch.compile"), "torch.compile(backend='torch_tensorrt') ran"
    x = torch.randn(2, 8)
    torch.testing.assert_close(model(x), reference(x))


# -- Configuration Options -----------------------------------------------------------------------
def test_the_config_dataclass_has_the_documented_fields_and_defaults():
    from aitune.torch.backend import BackendConfig, TorchTensorRTConfig, TorchTensorRTJitBackendConfig

    assert issubclass(TorchTensorRTJitBackendConfig, BackendConfig)
    fields = {f.name: f for f in dataclasses.fields(TorchTensorRTJitBackendConfig)}
    assert list(fields)[:5] == ["compile_config", "fullgraph", "dynamic", "autocast_enabled", "autocast_dtype"]
    default = TorchTensorRTJitBackendConfig()
    assert isinstance(default.compile_config, TorchTensorRTConfig)
    assert (default.fullgraph, default.dynamic, default.autocast_enabled, default.autocast_dtype) == (
        False,
        None,
        False,
        None,
    )


@needs_trt
def test_compile_config_workspace_size_as_written():
    from aitune.torch.backend import TorchTensorRTJitBackendConfig
    from torch_tensorrt.dynamo import CompilationSettings

    config = TorchTensorRTJitBackendConfig(
        compile_config=CompilationSettings(
            workspace_size=1 << 30,  # 1GB
        )
    )
    assert config.compile_config.workspace_size == 1 << 30


@needs_trt
def test_compile_config_fp16_weak_typing_as_written():
    from aitune.torch.backend import TorchTensorRTJitBackendConfig
    from torch_tensorrt.dynamo import CompilationSettings

    config = TorchTensorRTJitBackendConfig(
        compile_config=CompilationSettings(
            enabled_precisions={torch.float16},
            use_explicit_typing=False,
        )
    )
    assert config.compile_config.use_explicit_typing is False


def test_compile_config_snippets_with_the_config_class_aitune_exports():
    """The same two snippets with `TorchTensorRTConfig`, which is CompilationSettings when the
    library is installed and the keyword stand-in otherwise."""
    from aitune.torch.backend import TorchTensorRTConfig, TorchTensorRTJitBackend, TorchTensorRTJitBackendConfig

    config = TorchTensorRTJitBackendConfig(
        compile_config=TorchTensorRTConfig(
            workspace_size=1 << 30,  # 1GB
        )
    )
    assert config.compile_config.workspace_size == 1 << 30
    config = TorchTensorRTJitBackendConfig(
        compile_config=TorchTensorRTConfig(
            enabled_precisions={torch.float16},
            use_explicit_typing=False,
        )
    )
    assert config.compile_config.enabled_precisions == {torch.float16}
    assert TorchTensorRTJitBackend(config).precision_class == "fp16"
    assert TorchTensorRTJitBackendConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()


def test_fullgraph_dynamic_autocast_and_troubleshooting_configs_as_written():
    from aitune.torch.backend import TorchTensorRTJitBackend, TorchTensorRTJitBackendConfig

    config = TorchTensorRTJitBackendConfig(
        fullgraph=True,  # Raise error if graph breaks occur
    )
    assert config.fullgraph is True
    config = TorchTensorRTJitBackendConfig(
        dynamic=True,  # Enable dynamic shapes
    )
    assert config.dynamic is True
    config = TorchTensorRTJitBackendConfig(
        autocast_enabled=True,
        autocast_dtype=torch.float16,
    )
    assert TorchTensorRTJitBackend(config).precision_class == "fp16"
    config = TorchTensorRTJitBackendConfig(
        fullgraph=False,  # Allow partial compilation
    )
    assert TorchTensorRTJitBackend(config).describe() == "TorchTensorRTJitBackend()"


# -- Combining Them --------------------------------------------------------------------------------
def test_combining_snippets_construct_both_backends_without_torch_tensorrt():
    import aitune.torch as ait
    from aitune.torch.backend import TorchTensorRTAotBackend, TorchTensorRTJitBackend

    model, data = _model(), _input_data()
    wrapped_model = ait.Module(model, "model", strategy=ait.OneBackendStrategy(TorchTensorRTJitBackend()))
    assert wrapped_model.module is model and type(wrapped_model._self_strategy.backend) is TorchTensorRTJitBackend
    wrapped_model = ait.Module(model, "model", strategy=ait.OneBackendStrategy(TorchTensorRTAotBackend()))
    assert wrapped_model.name == "model" and type(wrapped_model._self_strategy.backend) is TorchTensorRTAotBackend
    # ait.tune(wrapped_model, data) needs Torch-TensorRT and CUDA: test_combining_aot_tuning_snippets_tune_as_written
    assert len(data) == 4


@needs_trt_and_cuda
@pytest.mark.parametrize("backend_name", ["TorchTensorRTJitBackend", "TorchTensorRTAotBackend"])
def test_combining_aot_tuning_snippets_tune_as_written(backend_name):
    import aitune.torch as ait
    from aitune.torch import backend as backends

    model, data = _model(), _input_data()
    wrapped_model = ait.Module(model, "model", strategy=ait.OneBackendStrategy(getattr(backends, backend_name)()))
    ait.tune(wrapped_model, data)
    assert wrapped_model.state is ModuleState.TUNED


@pytest.fixture
def restored_jit_strategy():
    jit_config = _jit_config_or_skip()
    before = jit_config.strategy
    yield jit_config
    jit_config.strategy = before


def test_jit_tuning_with_the_jit_backend_as_written(restored_jit_strategy):
    from aitune.torch.backend import TorchTensorRTJitBackend

    # JIT Tuning + JIT Backend
    # Automatic tuning with runtime compilation
    from aitune.torch import jit_config
    from aitune.torch.tune_strategy import FirstWinsStrategy

    jit_config.strategy = FirstWinsStrategy(backends=[TorchTensorRTJitBackend()])
    assert [type(b) for b in jit_config.strategy.backends] == [TorchTensorRTJitBackend]


def test_jit_tuning_with_the_aot_backend_as_written(restored_jit_strategy):
    from aitune.torch.backend import TorchTensorRTAotBackend

    # JIT Tuning + AOT Backend
    # Automatic tuning with ahead-of-time compilation
    from aitune.torch import jit_config
    from aitune.torch.tune_strategy import FirstWinsStrategy

    jit_config.strategy = FirstWinsStrategy(backends=[TorchTensorRTAotBackend()])
    assert [type(b) for b in jit_config.strategy.backends] == [TorchTensorRTAotBackend]


JIT_SCRIPT = """
import torch
from aitune.torch import jit_config
from aitune.torch.backend import TorchTensorRTAotBackend, TorchTensorRTJitBackend
from aitune.torch.tune_strategy import FirstWinsStrategy
jit_config.strategy = FirstWinsStrategy(backends=[TorchTensorRTJitBackend(), TorchTensorRTAotBackend()])
jit_config.device = "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
x = torch.randn(3, 8)
with torch.no_grad():
    expected = torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, model[0].weight, model[0].bias)),
                                          model[2].weight, model[2].bias)
    for bs in (1, 2, 3):
        out = model(x[:bs])
    assert torch.allclose(out, expected, atol=1e-6), (out, expected)
print("SNIPPET_OK")
"""


BOOTSTRAP_GROUP = "aitune_enable_jit_tuning"


def _source_tree_entry_point(folder: Path) -> Path:
    """aitune runs from the source tree here, without installed entry points: a minimal
    .dist-info with pyproject's `aitune_enable_jit_tuning` entry point, for the child's sys.path."""
    pyproject = Path(aitune.__file__).resolve().parents[2] / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip(f"no installed `{BOOTSTRAP_GROUP}` entry point and no pyproject.toml at {pyproject}")
    import tomllib

    points = tomllib.loads(pyproject.read_text()).get("project", {}).get("entry-points", {}).get(BOOTSTRAP_GROUP)
    if not points:
        pytest.skip(f"pyproject.toml declares no `{BOOTSTRAP_GROUP}` entry point yet (JIT tuning is being written)")
    info = folder / "aitune_source_tree-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aitune-source-tree\nVersion: 0.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in points.items())
    (info / "entry_points.txt").write_text(f"[{BOOTSTRAP_GROUP}]\n{lines}")
    return folder


def test_the_bootstrap_environment_variable_snippet_runs_a_script(tmp_path):
    """`export AUTOWRAPT_BOOTSTRAP=aitune_enable_jit_tuning`, then a script with the guide's
    jit_config lines: on a host without Torch-TensorRT both backends are skipped with the reason
    and the model keeps serving correct results."""
    _jit_config_or_skip()
    package_root = str(Path(aitune.__file__).resolve().parents[1])
    paths = [package_root, os.environ.get("PYTHONPATH", "")]
    if not list(importlib.metadata.entry_points(group=BOOTSTRAP_GROUP)):
        paths.insert(0, str(_source_tree_entry_point(tmp_path / "entry_point")))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in paths if p),
        AITUNE_CACHE_DIR=str(tmp_path / "cache"),
        AITUNE_JIT_CACHE_DIR=str(tmp_path / "jit"),
        AUTOWRAPT_BOOTSTRAP=BOOTSTRAP_GROUP,
    )
    proc = subprocess.run(
        [sys.executable, "-c", JIT_SCRIPT], capture_output=True, text=True, env=env, timeout=300, errors="replace"
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "SNIPPET_OK" in log
    if not HAS_TRT:
        assert "backend skipped: TorchTensorRTJitBackend() — torch-tensorrt is not installed" in log, log
