"""Every snippet of the TensorRT backend seed guide, run as written (docs/reference/tensorrt.md). Snippets are kept
verbatim in SNIPPETS-style strings; names they use without defining (`model`, `input_data`,
`TensorRTProfile`, ...) come from the surrounding guide, so each test gives the namespace the guide's
reader has. Calls that need TensorRT and a GPU are skipped with the reason when either is missing."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import textwrap
from pathlib import Path

import fake_tensorrt
import pytest
import torch

import aitune.torch.backend as backend_pkg
from aitune.torch.backend.tensorrt import (
    ONNXAutoCastConfig,
    ONNXQuantizationConfig,
    ProfileMode,
    TensorRTBackend,
    TensorRTBackendConfig,
    TensorRTProfile,
    TorchQuantizationConfig,
)

HAS_TENSORRT = importlib.util.find_spec("tensorrt") is not None
NEEDS_TRT_GPU = (
    "needs the tensorrt package and a CUDA GPU (tensorrt is not installed here: its runtime needs CUDA; "
    "tests/conformance checks the glue against its bindings)"
)


def run(snippet: str, **names) -> dict:
    namespace = {
        "TensorRTBackend": TensorRTBackend,
        "TensorRTBackendConfig": TensorRTBackendConfig,
        "ONNXAutoCastConfig": ONNXAutoCastConfig,
        "ONNXQuantizationConfig": ONNXQuantizationConfig,
        "TorchQuantizationConfig": TorchQuantizationConfig,
        "ProfileMode": ProfileMode,
        "TensorRTProfile": TensorRTProfile,
        **names,
    }
    exec(compile(textwrap.dedent(snippet), "<seed snippet>", "exec"), namespace)
    return namespace


BASIC_USAGE_SETUP = """
from aitune.torch.backend import TensorRTBackend, TensorRTBackendConfig, ONNXAutoCastConfig, ONNXQuantizationConfig, TorchQuantizationConfig
import aitune.torch as ait

# Configure TensorRT backend
config = TensorRTBackendConfig(use_dynamo=True)
backend = TensorRTBackend(config)

# Use with tuning
from aitune.torch.tune_strategy import OneBackendStrategy
strategy = OneBackendStrategy(backend=backend)

model = ait.Module(model, "my-model", strategy=strategy)
"""
BASIC_USAGE_TUNE = """
ait.tune(model, input_data)
"""


def _model():
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()


def test_basic_usage_builds_the_objects():
    ns = run(BASIC_USAGE_SETUP, model=_model())
    assert ns["backend"].config == TensorRTBackendConfig() and ns["strategy"] is not None
    assert ns["model"].name == "my-model"


@pytest.mark.skipif(not (HAS_TENSORRT and torch.cuda.is_available()), reason=NEEDS_TRT_GPU)
def test_basic_usage_tunes():
    ns = run(BASIC_USAGE_SETUP, model=_model().cuda())
    input_data = [torch.randn(8, device="cuda") for _ in range(4)]
    run(BASIC_USAGE_TUNE, ait=ns["ait"], model=ns["model"], input_data=input_data)
    assert ns["model"](torch.randn(2, 8, device="cuda")).shape == (2, 8)


def test_fp16_and_cuda_graph_quick_starts():
    ns = run("""
    config = TensorRTBackendConfig(
        quantization_config=ONNXAutoCastConfig(precision="fp16"),
        workspace_size=1 << 30,  # 1GB workspace
    )
    backend = TensorRTBackend(config)
    """)
    assert ns["backend"].precision_class == "fp16" and ns["config"].workspace_size == 1 << 30
    ns = run("""
    config = TensorRTBackendConfig(
        use_cuda_graphs=True,  # Enable CUDA graphs
    )
    backend = TensorRTBackend(config)
    """)
    assert ns["backend"].describe() == "TensorRTBackend(use_cuda_graphs=True)"


def test_config_dataclass_listing_matches_ours():
    from dataclasses import dataclass

    from aitune.torch.backend import BackendConfig

    ns = run(
        """
    @dataclass
    class TensorRTBackendConfig(BackendConfig):
        use_dynamo: bool = True
        workspace_size: int | None = None
        opset_version: int | None = None
        optimization_level: int | None = None
        compatibility_level: int | None = None
        timing_cache: Path | None = None
        profiles: ProfileMode | list[TensorRTProfile] = ProfileMode.SINGLE
        device: str = "cuda"
        quantization_config: ONNXAutoCastConfig | ONNXQuantizationConfig | TorchQuantizationConfig | None = None
        enable_tf32: bool = True
        use_cuda_graphs: bool = False
    """,
        dataclass=dataclass,
        BackendConfig=BackendConfig,
        Path=Path,
    )
    listed = {f.name: f.default for f in dataclasses.fields(ns["TensorRTBackendConfig"])}
    ours = {f.name: f.default for f in dataclasses.fields(TensorRTBackendConfig)}
    assert listed == ours


def test_option_snippets():
    ns = run("""
    # Use Dynamo export (recommended)
    config = TensorRTBackendConfig(use_dynamo=True)

    # Use script-based export (fallback)
    config = TensorRTBackendConfig(use_dynamo=False)
    """)
    assert ns["config"].use_dynamo is False
    ns = run("""
    config = TensorRTBackendConfig(
        workspace_size=1 << 30,  # 1GB
    )

    # Or larger for complex models
    config = TensorRTBackendConfig(
        workspace_size=4 << 30,  # 4GB
    )
    """)
    assert ns["config"].workspace_size == 4 << 30
    assert (
        run("""
    config = TensorRTBackendConfig(
        opset_version=17,  # Use ONNX opset 17
    )
    """)["config"].opset_version
        == 17
    )
    assert (
        run("""
    config = TensorRTBackendConfig(
        optimization_level=5,  # Maximum optimization
    )
    """)["config"].optimization_level
        == 5
    )
    ns = run("""
    from pathlib import Path

    config = TensorRTBackendConfig(
        timing_cache=Path("/path/to/timing_cache.bin"),
    )
    """)
    assert ns["config"].timing_cache == Path("/path/to/timing_cache.bin")
    assert (
        run("""
    config = TensorRTBackendConfig(
        device="cuda",  # Default
    )
    """)["config"]
        == TensorRTBackendConfig()
    )
    assert (
        run("""
    config = TensorRTBackendConfig(
        enable_tf32=True,  # Default
    )
    """)["config"].enable_tf32
        is True
    )
    assert (
        run("""
    config = TensorRTBackendConfig(
        use_cuda_graphs=True,
    )
    """)["config"].use_cuda_graphs
        is True
    )


COMPATIBILITY = """
import tensorrt as trt

config = TensorRTBackendConfig(
    compatibility_level=trt.HardwareCompatibilityLevel.AMPERE_PLUS,
)
"""


@pytest.mark.skipif(
    not HAS_TENSORRT,
    reason="tensorrt is not installed here (its runtime needs CUDA; "
    "tests/conformance checks the glue against its bindings)",
)
def test_compatibility_level_with_the_real_module():
    assert run(COMPATIBILITY)["config"].compatibility_level == "AMPERE_PLUS"


def test_compatibility_level_with_the_fake_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt.as_module())
    assert run(COMPATIBILITY)["config"].compatibility_level == "AMPERE_PLUS"


def test_profiles_snippets():
    ns = run("""
    from aitune.torch.backend.tensorrt import ProfileMode, TensorRTProfile

    # Single profile (default)
    config = TensorRTBackendConfig(
        profiles=ProfileMode.SINGLE,
    )

    # Multiple profiles from samples
    config = TensorRTBackendConfig(
        profiles=ProfileMode.SAMPLES_USED,
    )

    # Custom profiles
    config = TensorRTBackendConfig(
        profiles=[
            TensorRTProfile()
                .add_input_shape("input", (1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224)),
        ]
    )
    """)
    assert ns["config"].profiles[0].inputs == {"input": ((1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))}
    assert (
        run("""
    config = TensorRTBackendConfig(
        profiles=ProfileMode.SINGLE,
    )
    """)["config"].profiles
        is ProfileMode.SINGLE
    )
    assert (
        run("""
    config = TensorRTBackendConfig(
        profiles=ProfileMode.SAMPLES_USED,
    )
    """)["config"].profiles
        is ProfileMode.SAMPLES_USED
    )


def test_samples_used_advice_makes_the_backend_constructible():
    from aitune.torch.config import config as aitune_config

    with pytest.raises(ValueError, match="max_num_samples_stored is set to 1"):
        TensorRTBackend(TensorRTBackendConfig(profiles=ProfileMode.SAMPLES_USED))
    run("""
    from aitune.torch.config import config as global_config

    global_config.max_num_samples_stored = 100  # Or float("inf")
    """)
    assert aitune_config.max_num_samples_stored == 100
    TensorRTBackend(TensorRTBackendConfig(profiles=ProfileMode.SAMPLES_USED))


def test_quantization_snippets():
    ns = run("""
    # FP16/BF16 mixed precision autocast
    config = TensorRTBackendConfig(
        quantization_config=ONNXAutoCastConfig(precision="fp16"),
    )
    """)
    assert ns["config"].quantization_config == ONNXAutoCastConfig()
    ns = run("""
    # ONNX quantization
    config = TensorRTBackendConfig(
        quantization_config=ONNXQuantizationConfig(precision="int8", calibration_method="max"),
    )
    """)
    assert ns["config"].quantization_config.calibration_method == "max"
    ns = run("""
    # ModelOpt PyTorch quantization presets
    config = TensorRTBackendConfig(
        quantization_config=TorchQuantizationConfig(quantization_config="FP8_DEFAULT_CFG"),
    )
    """)
    assert TensorRTBackend(ns["config"]).precision_class == "fp8"
    ns = run("""
    # Try 'entropy' instead of 'max'
    quantization_config = ONNXQuantizationConfig(
        precision="int8",
        calibration_method="entropy",
    )
    """)
    assert ns["quantization_config"].calibration_method == "entropy"


def test_custom_profiles_snippet_validates_against_a_forward_input_module():
    ns = run("""
    from aitune.torch.backend.tensorrt import TensorRTProfile

    profiles = [
        # Profile for small inputs
        TensorRTProfile()
            .add_input_shape(
                "input",
                min_shape=(1, 3, 224, 224),
                opt_shape=(4, 3, 224, 224),
                max_shape=(8, 3, 224, 224),
            ),
        # Profile for large inputs
        TensorRTProfile()
            .add_input_shape(
                "input",
                min_shape=(1, 3, 512, 512),
                opt_shape=(4, 3, 512, 512),
                max_shape=(8, 3, 512, 512),
            ),
    ]

    config = TensorRTBackendConfig(profiles=profiles)
    """)
    from aitune.torch.backend.tensorrt.profiles import build_profiles

    graph = _image_graph([(2, 3, 224, 224), (8, 3, 512, 512)])
    assert build_profiles(graph, ns["config"].profiles) == [
        [([1, 3, 224, 224], [4, 3, 224, 224], [8, 3, 224, 224])],
        [([1, 3, 512, 512], [4, 3, 512, 512], [8, 3, 512, 512])],
    ]


class _Image(torch.nn.Module):
    def forward(self, input):  # noqa: A002 - the guide's parameter name
        return input.mean(dim=(2, 3))


def _image_graph(shapes):
    import aitune.torch as ait
    from aitune.torch.global_context import published_batch_size

    m = ait.Module(_Image(), "my-model")
    with torch.no_grad():
        for s in shapes:
            with published_batch_size(s[0]):
                m(torch.zeros(*s))
    return m.graph_specs[0]


LOG_TABLE = """
╒═══════════════╤═════════════════╤═══════════════════════════════╤══════════════════╤══════════════════╤═══════════════╕
│ Access Path   │ Semantic Path   │ Shape                         │ Min Shape        │ Max Shape        │ Dtype         │
╞═══════════════╪═════════════════╪═══════════════════════════════╪══════════════════╪══════════════════╪═══════════════╡
│ input         │ input           │ ['batch0', 3, 'dim2', 'dim3'] │ [2, 3, 224, 224] │ [8, 3, 448, 448] │ torch.float32 │
╘═══════════════╧═════════════════╧═══════════════════════════════╧══════════════════╧══════════════════╧═══════════════╛
"""


def test_finding_input_paths_log_table_is_what_we_print():
    graph = _image_graph([(2, 3, 224, 224), (8, 3, 448, 448)])
    assert LOG_TABLE.strip() in graph.input_spec.table()


def test_troubleshooting_snippets():
    assert (
        run("""
    config = TensorRTBackendConfig(use_dynamo=False)
    """)["config"].use_dynamo
        is False
    )
    assert (
        run("""
    config = TensorRTBackendConfig(workspace_size=512 << 20)  # 512MB
    """)["config"].workspace_size
        == 512 << 20
    )
    ns = run("""
    profiles = [
        TensorRTProfile()
            .add_input_shape("input", min_shape=(1, 3, 224, 224), opt_shape=(4, 3, 224, 224), max_shape=(16, 3, 224, 224))
    ]
    config = TensorRTBackendConfig(profiles=profiles)
    """)
    from aitune._native import _C
    from aitune.exceptions import ProfileShapeError
    from aitune.torch.backend.tensorrt.profiles import build_profiles

    # The error the section quotes, and that the updated profile covers the shape.
    narrow = _C.TrtProfileSelector(["input"], [[([1, 3, 224, 224], [4, 3, 224, 224], [8, 3, 224, 224])]])
    with pytest.raises(ProfileShapeError, match=r"^Input shape \[16, 3, 224, 224\] exceeds max profile shape "):
        narrow.select([[16, 3, 224, 224]])
    graph = _image_graph([(2, 3, 224, 224), (8, 3, 224, 224)])
    widened = _C.TrtProfileSelector(["input"], build_profiles(graph, ns["config"].profiles))
    assert widened.select([[16, 3, 224, 224]]) == 0


def test_every_group_name_is_importable_from_the_backend_package():
    for name in (
        "TensorRTBackend",
        "TensorRTBackendConfig",
        "ONNXAutoCastConfig",
        "ONNXQuantizationConfig",
        "TorchQuantizationConfig",
    ):
        assert hasattr(backend_pkg, name)
