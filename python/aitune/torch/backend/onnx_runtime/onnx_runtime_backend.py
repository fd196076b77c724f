"""ONNXRuntimeBackend: ONNX export (docs/reference/tensorrt.md#build-pipelines) served by an ONNX Runtime session
(docs/reference/backends.md#per-backend-behaviour).

The build exports `model_raw.onnx` (+ `model_raw.onnx.data` above 2 GB) and `onnx_runtime_io.json`
(the forward's output structure, so a checkpoint rebuilds outputs without running the module),
creates the session and runs every stored sample through it: the TensorRT provider compiles
lazily, so provider failures surface in the build, not in the first served call.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path

import torch

from aitune._native import _C
from aitune.exceptions import AITuneUserInputError, BackendUnavailableError
from aitune.torch.backend.backend import ArtifactPath, Backend, OutputStructure
from aitune.torch.backend.registry import register_backend
from aitune.torch.backend.common.onnx_export import export_onnx_with_template, onnx_input_name
from aitune.torch.backend.onnx_runtime.onnx_runtime_config import ONNXExecutionProvider, ONNXRuntimeBackendConfig
from aitune.torch.backend.onnx_runtime.onnx_runtime_session import OrtSession, gpu_providers_missing
from aitune.torch.config import config as aitune_config
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.checkpoint.structure import NotRepresentable
from aitune.torch.validation import NumericTolerance

logger = logging.getLogger("aitune")

MODEL_NAME = "model_raw.onnx"
IO_NAME = "onnx_runtime_io.json"
IO_FORMAT_VERSION = 1


def _missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


@register_backend("onnx_runtime")
class ONNXRuntimeBackend(Backend):
    config_class = ONNXRuntimeBackendConfig
    restores_from_artifacts = True

    def __init__(
        self, config: ONNXRuntimeBackendConfig | None = None, *, tolerance: NumericTolerance | None = None
    ) -> None:
        super().__init__(config, tolerance=tolerance)
        self._model: ArtifactPath | None = None
        self._model_data: ArtifactPath | None = None
        self._io: ArtifactPath | None = None
        self._session: OrtSession | None = None
        self._signature: _C.Signature | None = None  # of the graph's forward
        self._input_names: list[str] = []  # graph tensor leaves present in the model, in leaf order
        self._input_leaves: list[int] = []  # their indices among the graph's tensor leaves
        self._outputs: OutputStructure | None = None  # where the model's outputs go, in model output order

    # -- identity ----------------------------------------------------------------------------
    # is_jit (False) and precision_class ("fp32") are the base class's.
    @property
    def model_path(self) -> Path | None:
        return self._model.path if self._model is not None else None

    @property
    def providers(self) -> list[str]:
        """The providers of the live session, most preferred first (empty when inactive)."""
        return list(self._session.providers) if self._session is not None else []

    def is_available(self) -> tuple[bool, str]:
        needed = ["onnxruntime", "onnx"] + (["onnxscript"] if self.config.use_dynamo else [])
        missing = [name for name in needed if _missing(name)]
        if missing:
            return False, " ".join(f"{name} is not installed. Please install `{name}`." for name in missing)
        ep = self.config.execution_provider
        if ep is not None:
            reason = gpu_providers_missing(ep)
            if reason:
                return False, reason
        return True, ""

    def _artifacts(self) -> dict[str, ArtifactPath | None]:
        return {"model": self._model, "model_data": self._model_data, "io": self._io}

    # -- build -------------------------------------------------------------------------------
    def _build(
        self, module: torch.nn.Module, graph_spec: GraphSpec, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        if not data:
            raise ValueError(f"ONNXRuntimeBackend needs a recorded sample of graph {graph_spec.name} to export it")
        graph: GraphSpec = graph_spec
        self._provider(device)  # fail before the export when the provider cannot run here
        module.to(device)
        info, template = export_onnx_with_template(
            module,
            graph,
            data,
            Path(cache_dir) / MODEL_NAME,
            use_dynamo=self.config.use_dynamo,
            opset_version=self.config.opset_version,
        )
        cache_dir = Path(cache_dir)
        self._model = ArtifactPath.from_existing(info.path, cache_dir)
        data_file = info.path.with_name(info.path.name + ".data")
        self._model_data = ArtifactPath.from_existing(data_file, cache_dir) if data_file.exists() else None
        self._set_layout(graph, OutputStructure.of(template))
        io_path = cache_dir / IO_NAME
        io_path.write_text(json.dumps(self._io_json()))
        self._io = ArtifactPath.from_existing(io_path, cache_dir)
        self._open(device)
        for n, sample in enumerate(data):
            try:
                self._infer(*sample.args, **sample.kwargs)
            except Exception as e:
                raise RuntimeError(
                    f"ONNX Runtime ({', '.join(self.providers)}) failed to run stored sample {n} of "
                    f"graph '{graph.name}': {type(e).__name__}: {e}"
                ) from e

    def _unavailable_on(self, device: torch.device) -> str | None:
        """The default provider on a CUDA device is CUDA: with a CPU-only onnxruntime the
        strategies skip this backend there (naming onnxruntime-gpu) instead of failing it."""
        if self.config.execution_provider is None and device.type == "cuda" and not _missing("onnxruntime"):
            return gpu_providers_missing(ONNXExecutionProvider.CUDA)
        return None

    def _provider(self, device: torch.device) -> ONNXExecutionProvider:
        ep = self.config.execution_provider
        if ep is None:
            ep = ONNXExecutionProvider.CUDA if device.type == "cuda" else ONNXExecutionProvider.CPU
        if ep is ONNXExecutionProvider.CPU and device.type != "cpu":
            raise AITuneUserInputError(
                f"{self.describe()}: execution_provider='cpu' needs the tuning device cpu, got {device}"
            )
        if ep is not ONNXExecutionProvider.CPU:
            reason = gpu_providers_missing(ep)
            if reason:
                raise BackendUnavailableError(reason)
            if device.type != "cuda":
                raise AITuneUserInputError(
                    f"{self.describe()}: execution_provider={ep.value!r} needs a CUDA tuning device, got {device}"
                )
        return ep

    def _set_layout(self, graph: GraphSpec, outputs: OutputStructure) -> None:
        """Which graph leaves feed the model (the exporter may drop unused ones) and how its
        outputs map back into the forward's output structure."""
        import onnx

        model = onnx.load(str(self._model.path), load_external_data=False)
        present = {value.name for value in model.graph.input}
        names = [onnx_input_name(leaf.semantic_path) for leaf in graph.input_spec.tensors]
        self._input_leaves = [i for i, name in enumerate(names) if name in present]
        self._input_names = [names[i] for i in self._input_leaves]
        unknown = sorted(present - set(names))
        if unknown:
            raise RuntimeError(
                f"ONNX model {self._model.path} takes inputs {unknown} that graph '{graph.name}' does "
                f"not have ({graph.input_spec.describe_structure()})"
            )
        self._signature = _C.Signature(graph.forward_params)
        self._outputs = outputs
        if outputs.num_outputs != len(model.graph.output):
            raise RuntimeError(
                f"ONNX model {self._model.path} has {len(model.graph.output)} outputs; the output "
                f"structure of graph '{graph.name}' has {outputs.num_outputs} tensors"
            )

    def _io_json(self) -> dict[str, object]:
        assert self._outputs is not None
        try:
            structure = self._outputs.to_json()
        except NotRepresentable as e:
            logger.warning(
                "ONNXRuntimeBackend: the output structure cannot be stored (%s); a checkpoint will "
                "rebuild it from the graph's stored reference output",
                e,
            )
            structure = None
        return {"format_version": IO_FORMAT_VERSION, "input_names": self._input_names, "output_structure": structure}

    def _open(self, device: torch.device) -> None:
        self._session = OrtSession(self._model.path, self._provider(device), device, self._input_names)

    # -- serving -----------------------------------------------------------------------------
    def _infer(self, *args: object, **kwargs: object) -> object:
        _, leaves = _C.flatten_call(self._signature, args, kwargs, aitune_config.strict_mode, -1)
        tensors = [leaf.value for leaf in leaves if leaf.is_tensor]
        outputs = self._session.run([tensors[i] for i in self._input_leaves])
        return self._outputs.rebuild(outputs)

    def input_profile(self) -> list[tuple[list[int], list[int | None]]] | None:
        """Per graph tensor input: static axes exact, dynamic axes unbounded
        (docs/reference/backends.md#per-backend-behaviour); None for inputs the model does not take."""
        if self._session is None or self._graph_spec is None:
            return super().input_profile()
        shapes = {value.name: value.shape for value in self._session.session.get_inputs()}
        profile: list[tuple[list[int], list[int | None]] | None] = [None] * len(self._graph_spec.input_spec.tensors)
        for leaf, name in zip(self._input_leaves, self._input_names):
            dims = shapes[name]
            profile[leaf] = (
                [d if isinstance(d, int) else 0 for d in dims],
                [d if isinstance(d, int) else None for d in dims],
            )
        return profile

    def _activate(self) -> None:
        if self._session is None and self._model is not None and self._device is not None:
            self._open(self._device)

    def _deactivate(self) -> None:
        self._session = None  # frees the session's device memory; activation recreates it
        if self._device is not None and self._device.type == "cuda":
            torch.cuda.empty_cache()

    # -- checkpoints -------------------------------------------------------------------------
    def _adopt_artifacts(self, artifacts: dict[str, Path], graph: GraphSpec) -> None:
        model = Path(artifacts["model"])
        self._model = ArtifactPath.from_existing(model, model.parent)
        if "model_data" in artifacts:
            data = Path(artifacts["model_data"])
            self._model_data = ArtifactPath.from_existing(data, data.parent)
        outputs = None
        if "io" in artifacts:
            io_path = Path(artifacts["io"])
            self._io = ArtifactPath.from_existing(io_path, io_path.parent)
            structure = json.loads(io_path.read_text()).get("output_structure")
            if structure is not None:
                outputs = OutputStructure.from_json(structure)
        if outputs is None and graph.reference_outputs:
            outputs = OutputStructure.of(graph.reference_outputs[0])
        if outputs is None:
            raise RuntimeError(
                f"Cannot restore ONNXRuntimeBackend for graph '{graph.name}': the checkpoint holds "
                "neither its output structure nor a reference output"
            )
        self._set_layout(graph, outputs)
        self._graph_spec = graph

    def _restore(self, artifacts: dict[str, Path], graph: GraphSpec, device: torch.device) -> None:
        """A checkpoint's extracted files (ait.load): the session opens on `device` at once."""
        self._adopt_artifacts(artifacts, graph)
        self._deploy(device)

    def _deploy(self, device: torch.device) -> None:
        self._open(device)
