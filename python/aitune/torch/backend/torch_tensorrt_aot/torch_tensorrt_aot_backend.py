"""TorchTensorRTAotBackend: torch.export + torch_tensorrt.dynamo.compile, saved with
torch_tensorrt.save as ``exported_model.pt`` (docs/reference/backends.md#per-backend-behaviour).

Export traces an adapter that takes the graph's tensor inputs alone and calls the module's
original forward with the recorded non-tensor values (tensor_inputs.py: Torch-TensorRT cannot
save a program with non-tensor inputs), with ``strict=False`` and the dims of
:mod:`aitune.torch.backend.common.export_shapes`, except that recorded ``dim`` axes get a named Dim
with their recorded range instead of ``Dim.AUTO``: a TensorRT engine needs an explicit range
for every dynamic axis, and the exported program should promise exactly the range the engine
gets. Each tensor input becomes ``torch_tensorrt.Input(min, opt=max, max, dtype,
name=input_<path>)``.

The artifact's format belongs to Torch-TensorRT: aitune verifies its hash (the checkpoint layer
does) and loads it only through ``torch_tensorrt.load(...).module()``. A compiled program without any
TensorRT engine (everything partitioned to PyTorch) is refused before it is saved; PyTorch
partitions next to engines are logged (common/torch_tensorrt_config.EngineCoverage).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any, Iterator

import torch

from aitune._native import _C
from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend.backend import ArtifactPath, Backend
from aitune.torch.backend.registry import register_backend
from aitune.torch.backend.common.export_shapes import (
    _BATCH,
    _NAMED,
    ExportShapePlan,
    _identifier,
    prepare_export_sample,
)
from aitune.torch.backend.torch_tensorrt_aot.tensor_inputs import (
    graph_tensors,
    make_tensor_inputs_adapter,
    parameter_names,
)
from aitune.torch.backend.torch_tensorrt_aot.torch_tensorrt_aot_config import TorchTensorRTAotBackendConfig
from aitune.torch.backend.common.torch_tensorrt_config import (
    EngineCoverage,
    import_torch_tensorrt,
    settings_overrides,
    settings_precision_class,
    torch_tensorrt_availability,
)
from aitune.torch.config import config as global_config
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.validation import NumericTolerance

logger = logging.getLogger("aitune")
EXPORTED_MODEL_NAME = "exported_model.pt"
ARTIFACT_KEY = "exported_model"


def input_name(path: tuple) -> str:
    return "input_" + "_".join(str(part) for part in path)


class NamedDimsPlan(ExportShapePlan):
    """ExportShapePlan whose recorded `dim` axes are named Dims over their recorded range, and
    which knows every tensor's (min, max) shape: the Torch-TensorRT Input range."""

    def input_range(self, path: tuple) -> tuple[list[int], list[int]]:
        leaf = self._tensors[path]
        low, high = list(leaf.spec.min_shape), list(leaf.spec.max_shape)
        for i, axis in enumerate(self.axes.get(path, ())):
            if axis.kind == _BATCH and self.batch_range is not None:
                low[i], high[i] = axis.multiplier * self.batch_range[0], axis.multiplier * self.batch_range[1]
            elif axis.kind == _NAMED:
                low[i], high[i] = axis.definition.min, axis.definition.max
        return low, high

    def tensor_dynamic_shape(self, path: tuple, batch_dim: Any, named: dict[str, Any]) -> dict[int, Any] | None:
        from torch.export import Dim

        spec = super().tensor_dynamic_shape(path, batch_dim, named)
        if not spec:
            return spec
        low, high = self.input_range(path)
        for axis, value in list(spec.items()):
            if value is Dim.AUTO or value == Dim.AUTO:
                if high[axis] > low[axis]:
                    spec[axis] = Dim(_identifier(f"{input_name(path)}_{axis}"), min=low[axis], max=high[axis])
                else:
                    del spec[axis]  # one recorded size: static
        return spec or None


@register_backend("torch_tensorrt_aot")
class TorchTensorRTAotBackend(Backend):
    config_class = TorchTensorRTAotBackendConfig
    _build_cost = 3.0  # export, then TensorRT engines
    restores_from_artifacts = True
    _devices = ("cuda",)

    def __init__(
        self, config: TorchTensorRTAotBackendConfig | None = None, *, tolerance: NumericTolerance | None = None
    ) -> None:
        super().__init__(config, tolerance=tolerance)
        self._program: Any = None  # the loaded module (torch_tensorrt.load(...).module())
        self._artifact: ArtifactPath | None = None
        self._signature: Any = None
        self._paths: list[tuple] = []  # the graph's tensor inputs: the exported program's parameters
        self._profile: list[tuple[list[int], list[int]]] | None = None
        self.engine_coverage = EngineCoverage()

    # -- identity (is_jit is the base class's False) --------------------------------------------
    @property
    def precision_class(self) -> str:
        return settings_precision_class(self.config.compile_config) or "fp32"

    def is_available(self) -> tuple[bool, str]:
        return torch_tensorrt_availability()

    @property
    def artifact_path(self) -> Path | None:
        return self._artifact.path if self._artifact is not None else None

    def _artifacts(self) -> dict[str, ArtifactPath | None]:
        return {ARTIFACT_KEY: self._artifact}

    def input_profile(self) -> list[tuple[list[int], list[int | None]]] | None:
        """The single Input range per graph tensor input (graph.input_spec.tensors order)."""
        if self._profile is None:
            return super().input_profile()
        return [(list(low), list(high)) for low, high in self._profile]

    # -- build -------------------------------------------------------------------------------
    def _build(
        self, module: torch.nn.Module, graph_spec: GraphSpec, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        trt = import_torch_tensorrt()
        if trt is None:
            raise BackendUnavailableError(torch_tensorrt_availability()[1])
        graph: GraphSpec = graph_spec
        if not data:
            raise ValueError(f"{self.name} needs a recorded sample of graph {graph.name} to export it")
        if graph.input_spec.constants and not global_config.strict_mode:
            raise ValueError(
                f"{self.name} needs config.strict_mode=True when a graph has non-tensor inputs: the "
                f"exported program keeps the non-tensor values of the recorded call "
                f"({', '.join(f'{c.access_path}={c.value!r}' for c in graph.input_spec.constants)})"
            )
        module.to(device)
        self._bind_graph(graph)
        plan = NamedDimsPlan(graph)
        args, kwargs = prepare_export_sample(graph, data[0], plan)
        bound = self._signature.bind(tuple(args), dict(kwargs))
        exported = self._export(module, graph, plan, bound)
        settings = settings_overrides(self.config.compile_config)
        with torch.no_grad():
            compiled = trt.dynamo.compile(
                exported, arg_inputs=self.compile_inputs(trt, plan, bound, self._paths), device=device, **settings
            )
        self.engine_coverage = EngineCoverage()
        self.engine_coverage.add(compiled)
        self.engine_coverage.check(self.name, graph.name)  # before saving: a PyTorch fallback is no candidate
        path = Path(cache_dir) / EXPORTED_MODEL_NAME
        # No inputs: with retrace=False Torch-TensorRT serialises the compiled graph as it is, and
        # 2.11 checks any inputs it is given before it looks at retrace (docs/guide.md).
        trt.save(
            compiled,
            str(path),
            output_format="exported_program",
            retrace=False,
            pickle_protocol=self.config.pickle_protocol,
        )
        del compiled, exported
        self._artifact = ArtifactPath.from_existing(path, Path(cache_dir))
        self._profile = [plan.input_range(p) for p in self._paths]
        self._load(trt)

    def _export(self, module: torch.nn.Module, graph: GraphSpec, plan: NamedDimsPlan, bound: dict) -> Any:
        """torch.export of the tensor-inputs adapter (tensor_inputs.py) with the recorded ranges as
        named dims; with automatic dims for the recorded dim axes when the named ones fail."""
        adapter = make_tensor_inputs_adapter(module, graph.forward_params, bound, self._paths)
        example = tuple(graph_tensors(bound, self._paths))
        named_dims = self._dynamic_shapes(plan)
        with torch.no_grad():
            try:
                return torch.export.export(adapter, example, dynamic_shapes=named_dims, strict=False)
            except Exception as e:  # noqa: BLE001 - e.g. two named dims the model proves equal
                automatic = self._dynamic_shapes(ExportShapePlan(graph))
                if named_dims == automatic:
                    raise
                logger.info(
                    "%s (graph '%s'): export with named dims failed (%s: %s); exporting with automatic "
                    "dims for the recorded dim axes",
                    self.name,
                    graph.name,
                    type(e).__name__,
                    str(e).splitlines()[0] if str(e) else "",
                )
                return torch.export.export(adapter, example, dynamic_shapes=automatic, strict=False)

    def _dynamic_shapes(self, plan: ExportShapePlan) -> dict[str, Any] | None:
        if not plan.is_dynamic():
            return None
        batch_dim, named = plan._dims()
        return {
            name: plan.tensor_dynamic_shape(path, batch_dim, named)
            for name, path in zip(parameter_names(self._paths), self._paths)
        }

    @staticmethod
    def compile_inputs(trt: Any, plan: NamedDimsPlan, bound: dict, paths: list[tuple]) -> list:
        """arg_inputs for torch_tensorrt.dynamo.compile: the Input range (opt = max) of each tensor
        input, in the exported program's order. Nothing else is an input of the program (2.11
        would refuse a str and make 0-d tensor inputs of floats and bools)."""
        inputs = []
        for path, tensor in zip(paths, graph_tensors(bound, paths)):
            low, high = plan.input_range(path) if path in plan.axes else (list(tensor.shape), list(tensor.shape))
            inputs.append(
                trt.Input(min_shape=low, opt_shape=high, max_shape=high, dtype=tensor.dtype, name=input_name(path))
            )
        return inputs

    def _bind_graph(self, graph: GraphSpec) -> None:
        self._signature = _C.Signature(graph.forward_params)
        self._paths = [_as_tuple(t.semantic_path) for t in graph.input_spec.tensors]

    def _load(self, trt: Any = None) -> None:
        trt = trt or import_torch_tensorrt()
        if trt is None:
            raise BackendUnavailableError(torch_tensorrt_availability()[1])
        with _repaired_torch_export_fallback_warning():
            self._program = trt.load(str(self._artifact.path)).module()

    def _restore(self, artifacts: dict[str, Path], graph: GraphSpec, device: torch.device) -> None:
        """A checkpoint's extracted (hash-verified) exported_model.pt."""
        path = Path(artifacts[ARTIFACT_KEY])
        self._artifact = ArtifactPath.from_existing(path, path.parent)
        self._bind_graph(graph)
        self._load()

    # -- serving -----------------------------------------------------------------------------
    def _infer(self, *args: object, **kwargs: object) -> object:
        tensors = graph_tensors(self._signature.bind(tuple(args), dict(kwargs)), self._paths)
        with torch.no_grad():
            return self._program(*tensors)  # the program takes the graph's tensors alone

    def _activate(self) -> None:
        if self._program is None and self._artifact is not None:
            self._load()

    def _deactivate(self) -> None:
        self._program = None  # holds the engines; activation loads the saved program again
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


class _PadMissingLogArguments(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and isinstance(record.args, tuple):
            missing = record.msg.count("%s") - len(record.args)
            if missing > 0:
                record.args = record.args + ("(see the exception logged with it)",) * missing
        return True


@contextlib.contextmanager
def _repaired_torch_export_fallback_warning() -> Iterator[None]:
    """torch.export.load falls back to a full unpickling when the program holds objects the
    weights-only loader refuses (Torch-TensorRT's engines, pickle protocol >= 4) and logs that
    with two %s and one argument (torch 2.11). A handler that raises logging errors (pytest's)
    turns the warning into a failed load; the record is completed instead, so it still shows."""
    torch_logger = logging.getLogger("torch._export.serde.serialize")
    repair = _PadMissingLogArguments()
    torch_logger.addFilter(repair)
    try:
        yield
    finally:
        torch_logger.removeFilter(repair)


def _as_tuple(path: Any) -> tuple:
    return path if isinstance(path, tuple) else (path,)
