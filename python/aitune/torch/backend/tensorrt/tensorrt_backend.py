"""TensorRTBackend: ONNX export -> (ModelOpt) -> TensorRT engine, served by EngineRunner (docs/reference/tensorrt.md).

The builder and runner glue take the `tensorrt` module as a parameter; the backend resolves it
through `_import_tensorrt`, which tests replace with a recording fake. This module is also AITune's
import path for TensorRTBackend, TensorRTBackendConfig and ProfileMode (docs/guide.md, "Coming from AITune")."""

from __future__ import annotations

import importlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import torch

from aitune._native import _C
from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend.common.jit_warmup import original_forward
from aitune.torch.backend.common.onnx_export import export_onnx_with_template
from aitune.torch.backend.backend import ArtifactPath, Backend, OutputStructure
from aitune.torch.backend.registry import register_backend
from aitune.torch.backend.tensorrt import builder as trt_builder
from aitune.torch.backend.tensorrt import cuda_ops
from aitune.torch.checkpoint.structure import NotRepresentable
from aitune.torch.backend.tensorrt import quantization as quant
from aitune.torch.backend.tensorrt.tensorrt_config import (
    ONNXAutoCastConfig,
    ONNXQuantizationConfig,
    ProfileMode,
    TensorRTBackendConfig,
    TorchQuantizationConfig,
)
from aitune.torch.backend.tensorrt.engine_runner import EngineRunner
from aitune.torch.backend.tensorrt.profiles import (
    SAMPLES_USED_NEEDS_SAMPLES,
    _sample_tensors,
    build_profiles,
    read_profiles,
    write_profiles,
)
from aitune.torch.config import config as global_config
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.tune_data import recorder as tune_data
from aitune.torch.utils.tensors import to_device
from aitune.torch.validation import NumericTolerance

logger = logging.getLogger("aitune")

PLAN_PATH = Path("tensorrt") / "model.plan"
PROFILES_PATH = Path("tensorrt") / "model_optimization_profiles.json"
IO_PATH = Path("tensorrt") / "io.json"  # engine input per graph input, output paths (for loading without Python state)


def _import_tensorrt() -> Any:
    return importlib.import_module("tensorrt")


def _tensorrt_or_raise() -> Any:
    try:
        return _import_tensorrt()
    except ImportError as e:
        raise BackendUnavailableError("tensorrt is not installed. Please install `tensorrt`.") from e


@register_backend("tensorrt")
class TensorRTBackend(Backend):
    config_class = TensorRTBackendConfig
    _build_cost = 3.0  # ONNX export, then the TensorRT builder's tactic search
    restores_from_artifacts = True
    _devices = ("cuda",)

    def __init__(
        self, config: TensorRTBackendConfig | None = None, *, tolerance: NumericTolerance | None = None
    ) -> None:
        super().__init__(config, tolerance=tolerance)
        if self.config.profiles is ProfileMode.SAMPLES_USED and global_config.max_num_samples_stored == 1:
            raise ValueError(SAMPLES_USED_NEEDS_SAMPLES)
        self._runner: EngineRunner | None = None
        self._plan: ArtifactPath | None = None
        self._profiles_file: ArtifactPath | None = None
        self._io_file: ArtifactPath | None = None
        self._profiles: list | None = None
        self._input_names: list[str | None] = []
        self._display_names: list[str] = []
        self._output_names: list[str] = []
        self._outputs: OutputStructure | None = None  # where the engine's outputs go, in _output_names order
        self._signature: Any = None
        self._cast_back: list[torch.dtype] | None = None  # eager's output dtypes, in output order
        self.step_times_s: dict[str, float] = {}

    # -- identity ----------------------------------------------------------------------------
    @property
    def precision_class(self) -> str:
        """docs/reference/validation.md#numeric-comparison: int8; fp8 for fp8/int4/nvfp4 (the loose class); the autocast
        precision; tf32 when the TF32 builder flag is on (CUDA); else fp32."""
        q = self.config.quantization_config
        if isinstance(q, ONNXAutoCastConfig):
            return q.precision
        if isinstance(q, ONNXQuantizationConfig):
            return "int8" if q.precision == "int8" else "fp8"
        if isinstance(q, TorchQuantizationConfig):
            return "int8" if q.quantization_config.startswith("INT8") else "fp8"
        on_cuda = self._device is None or self._device.type == "cuda"
        return "tf32" if self.config.enable_tf32 and on_cuda else "fp32"

    def is_available(self) -> tuple[bool, str]:
        try:
            _import_tensorrt()
        except ImportError:
            return False, "tensorrt is not installed. Please install `tensorrt`."
        return True, ""

    def requirements(self) -> list[str]:
        """What a plan depends on (docs/reference/checkpoint.md#integrity-and-compatibility): TensorRT version, CUDA
        major and the GPU SM, or any SM >= 8 for an AMPERE_PLUS plan; not torch."""
        sm = "gpu_sm_ampere_plus" if self.config.compatibility_level == "AMPERE_PLUS" else "gpu_sm"
        return ["tensorrt", "cuda_major", sm]

    def _artifacts(self) -> dict[str, ArtifactPath | None]:
        if self._plan is None:
            return {}
        return {"plan": self._plan, "optimization_profiles": self._profiles_file, "io": self._io_file}

    # -- build -------------------------------------------------------------------------------
    def _step(self, name: str, output: Path, fn: Callable[[], Any]) -> Any:
        """One pipeline step: timed, its duration and output size sent to telemetry, and its
        partial output removed when it fails (docs/reference/tensorrt.md#build-pipelines)."""

        start = time.perf_counter()
        try:
            result = fn()
        except BaseException:
            shutil.rmtree(output.parent, ignore_errors=True)
            tune_data.record_step(f"tensorrt_{name}", time.perf_counter() - start, failed=True)
            raise
        self.step_times_s[name] = time.perf_counter() - start
        size = sum(p.stat().st_size for p in output.parent.rglob("*") if p.is_file()) if output.parent.exists() else 0
        tune_data.record_step(f"tensorrt_{name}", self.step_times_s[name], output_bytes=size)
        logger.info("TensorRT %s: %.2f s, %d bytes in %s", name, self.step_times_s[name], size, output.parent)
        return result

    def _build(
        self, module: torch.nn.Module, graph_spec: GraphSpec, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        # The tuning device is current while aitune exports and builds (TensorRT builds for the current
        # device), and the caller's current device is back afterwards.
        with cuda_ops.CUDA.device_guard(device):
            self._build_on_device(module, graph_spec, data, device, cache_dir)

    def _build_on_device(
        self, module: torch.nn.Module, graph_spec: GraphSpec, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        trt = _tensorrt_or_raise()
        graph: GraphSpec = graph_spec
        if not data:
            raise ValueError(f"TensorRTBackend needs a recorded sample of graph {graph.name} to build it")
        if self.config.device != device.type and torch.device(self.config.device) != device:
            logger.warning(
                "TensorRTBackendConfig.device=%r is informational: building for the tuning device %s",
                self.config.device,
                device,
            )
        cache_dir = Path(cache_dir)
        profiles = build_profiles(graph, self.config.profiles)  # validated before any expensive step
        module.to(device)
        forward = original_forward(module)
        q = self.config.quantization_config
        export_module = module
        if isinstance(q, TorchQuantizationConfig):

            def calibrate(model: torch.nn.Module) -> None:
                with torch.no_grad():
                    for sample in data:
                        args, kwargs = to_device((sample.args, sample.kwargs), device)
                        model(*args, **kwargs)

            export_module = self._step(
                "torch_ptq", cache_dir / "onnx_ptq" / "model.onnx", lambda: quant.torch_quantize(q, module, calibrate)
            )
            forward = None
        onnx_dir = "onnx_ptq" if isinstance(q, TorchQuantizationConfig) else "onnx"
        onnx_path = cache_dir / onnx_dir / "model.onnx"
        info, template = self._step(
            "onnx_export",
            onnx_path,
            lambda: export_onnx_with_template(
                export_module,
                graph,
                data,
                onnx_path,
                use_dynamo=self.config.use_dynamo,
                opset_version=self.config.opset_version,
                forward=forward,
            ),
        )
        if export_module is not module:
            del export_module
        module.to("cpu")  # offload while TensorRT builds: the builder needs the GPU memory
        if device.type == "cuda":
            torch.cuda.empty_cache()

        leaves = graph.input_spec.tensors
        names: list[str | None] = [None] * len(leaves)
        for name, index in zip(info.input_names, info.input_leaf_indices):
            names[index] = name
        if isinstance(q, (ONNXAutoCastConfig, ONNXQuantizationConfig)):
            calib = quant.calibration_data(self._sample_tensors(graph, data), names, _batch_axes(graph))
            if isinstance(q, ONNXAutoCastConfig):
                out = cache_dir / "onnx_autocast" / "model.onnx"
                onnx_path = self._step("onnx_autocast", out, lambda: quant.onnx_autocast(q, onnx_path, out, calib))
            else:
                out = cache_dir / "onnx_ptq" / "model.onnx"
                onnx_path = self._step("onnx_ptq", out, lambda: quant.onnx_quantize(q, onnx_path, out, calib))

        timing_cache = self.config.timing_cache
        if timing_cache is None and device.type == "cuda":
            major, minor = torch.cuda.get_device_capability(device)
            timing_cache = trt_builder.default_timing_cache_path(trt, Path(global_config.cache_dir), f"{major}{minor}")
        plan_path = cache_dir / PLAN_PATH
        try:
            plan, profiles = self._step(
                "engine_build",
                plan_path,
                lambda: trt_builder.build_engine(trt, onnx_path, plan_path, profiles, names, self.config, timing_cache),
            )
        finally:
            # Back where the strategy left it: other candidates and the eager fallback use it.
            module.to(device)
        write_profiles(cache_dir / PROFILES_PATH, profiles, names)
        self._outputs = OutputStructure.of(template)
        self._record_io(cache_dir, graph, names, info.output_names)
        self._start_runner(trt, plan, device, graph, names, profiles, info.output_names)

    @staticmethod
    def _sample_tensors(graph: GraphSpec, data: list) -> list[list[torch.Tensor]]:
        return [_sample_tensors(graph, sample) for sample in data]

    def _record_io(self, cache_dir: Path, graph: GraphSpec, names: list, output_names: list[str]) -> None:
        self._plan = ArtifactPath(cache_dir, PLAN_PATH)
        self._profiles_file = ArtifactPath(cache_dir, PROFILES_PATH)
        self._io_file = ArtifactPath(cache_dir, IO_PATH)
        assert self._outputs is not None
        try:
            structure = self._outputs.to_json()
        except NotRepresentable as e:  # a checkpoint then takes the structure from a stored reference output
            logger.warning("TensorRTBackend: the output structure of graph %s cannot be stored (%s)", graph.name, e)
            structure = None
        io = {
            "inputs": names,
            "outputs": output_names,
            "output_paths": [list(p) for p in self._outputs.paths or []],
            "output_structure": structure,
        }
        (cache_dir / IO_PATH).write_text(json.dumps(io, indent=2))

    def _start_runner(
        self,
        trt: Any,
        plan: bytes,
        device: torch.device,
        graph: GraphSpec,
        names: list,
        profiles: list,
        output_names: list[str],
    ) -> None:
        self._input_names = list(names)
        self._display_names = [leaf.access_path for leaf in graph.input_spec.tensors]
        self._profiles = profiles
        self._output_names = list(output_names)
        self._signature = _C.Signature(graph.forward_params)
        self._runner = EngineRunner(trt, plan, device, names, profiles, self._display_names)
        recorded = [leaf.dtypes[0] for leaf in graph.output_spec.tensors]
        self._cast_back = recorded if len(recorded) == len(output_names) else None
        extra = set(self._runner.output_names) - set(output_names)
        if extra:
            logger.warning(
                "TensorRT engine of graph %s has outputs %s that the forward does not return; ignored",
                graph.name,
                sorted(extra),
            )

    # -- serving -----------------------------------------------------------------------------
    def input_profile(self) -> list[tuple[list[int], list[int]]] | None:
        """Per graph tensor input: the envelope of the build's profiles, the hard range the
        dispatcher checks before the call (docs/reference/dispatch.md#input-check); the runner then picks the
        profile."""
        if self._profiles is None:
            return super().input_profile()

        return [(list(low), list(high)) for low, high in _C.trt_profile_envelope([list(p) for p in self._profiles])]

    def _infer(self, *args: object, **kwargs: object) -> object:
        if self._runner is None:
            raise RuntimeError("Engine not loaded. Call build() first.")
        _, leaves = _C.flatten_call(self._signature, tuple(args), dict(kwargs), False, -1)
        tensors = [leaf.value for leaf in leaves if leaf.is_tensor]
        outputs = self._runner.run(tensors)
        flat = [outputs[name] for name in self._output_names]
        if self._cast_back is not None:  # engine I/O in another precision than the model's outputs
            flat = [t if t.dtype == d else t.to(d) for t, d in zip(flat, self._cast_back)]
        return self._outputs.rebuild(flat)

    def _activate(self) -> None:
        if self._runner is None and self._plan is not None and self._device is not None:
            self._load_runner(self._device)

    def _deactivate(self) -> None:
        self._runner = None  # frees the engine and its context
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _load_runner(self, device: torch.device) -> None:
        trt = _tensorrt_or_raise()
        io = json.loads(self._io_file.path.read_text())
        names = io["inputs"]
        present = [n for n in names if n is not None]
        by_name = dict(zip(present, zip(*read_profiles(self._profiles_file.path, present)))) if present else {}
        count = len(next(iter(by_name.values()))) if by_name else 1
        profiles = []
        for p in range(count):
            profiles.append([by_name[n][p] if n is not None else self._unused_range(i) for i, n in enumerate(names)])
        self._outputs = self._saved_outputs(io)
        self._start_runner(trt, self._plan.path.read_bytes(), device, self._graph_spec, names, profiles, io["outputs"])

    def _saved_outputs(self, io: dict[str, Any]) -> OutputStructure:
        """The output structure of a loaded plan: from the graph's stored reference output, else
        from io.json (`output_structure`; `output_template` in files written before it, the same
        skeleton), checked against the output paths io.json lists."""
        paths = [tuple(p) for p in io["output_paths"]]
        outputs = self._outputs
        if outputs is None and paths == [()]:
            outputs = OutputStructure(None, [()], ["output"])
        node = io.get("output_structure", io.get("output_template"))
        if outputs is None and node is not None:
            outputs = OutputStructure.from_json(node)
        if outputs is None:
            raise RuntimeError(
                f"Cannot rebuild the outputs of graph {self._graph_spec.name}: its output type is not stored with the "
                "TensorRT plan and the checkpoint holds no reference outputs (save with include_samples=True)"
            )
        if outputs.paths != paths:
            raise RuntimeError(
                f"The TensorRT plan of graph {self._graph_spec.name} lists outputs {paths}, but its output structure "
                f"has {outputs.paths}: the checkpoint is inconsistent"
            )
        return outputs

    def _unused_range(self, index: int) -> tuple:
        spec = self._graph_spec.input_spec.tensors[index].spec
        return (list(spec.min_shape), list(spec.max_shape), list(spec.max_shape))

    @classmethod
    def _restoring(cls, config: TensorRTBackendConfig) -> TensorRTBackend:
        backend = cls()  # default config: the SAMPLES_USED construction check concerns building only
        backend.config = config
        return backend

    def _restore(self, artifacts: dict[str, Path], graph: GraphSpec, device: torch.device) -> None:
        """A checkpoint's extracted plan and profiles (ait.load)."""
        root = Path(artifacts["plan"]).parent.parent
        self._plan = ArtifactPath.from_existing(Path(artifacts["plan"]), root)
        self._profiles_file = ArtifactPath.from_existing(Path(artifacts["optimization_profiles"]), root)
        self._io_file = ArtifactPath.from_existing(Path(artifacts["io"]), root)
        if graph.reference_outputs:  # the structure only: tensors become placeholders
            self._outputs = OutputStructure.of(graph.reference_outputs[0])
        self._load_runner(device)


def _batch_axes(graph: GraphSpec) -> list[int | None]:
    axes = []
    for leaf in graph.input_spec.tensors:
        kinds = leaf.spec.axis_kinds
        axes.append(kinds.index("batch") if "batch" in kinds else None)
    return axes
