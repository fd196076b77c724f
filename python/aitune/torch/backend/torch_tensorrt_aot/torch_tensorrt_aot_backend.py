"""TorchTensorRTAotBackend: torch.export + torch_tensorrt.dynamo.compile, saved with
torch_tensorrt.save as ``exported_model.pt`` (SPEC §4.2).

Export traces the module's original forward through the same signature-preserving adapter as
the Inductor AOT backend, with ``strict=False`` and the dims of
:mod:`aitune.torch.backend.export_shapes`, except that recorded ``dim`` axes get a named Dim
with their recorded range instead of ``Dim.AUTO``: a TensorRT engine needs an explicit range
for every dynamic axis, and the exported program should promise exactly the range the engine
gets. Each tensor input becomes ``torch_tensorrt.Input(min, opt=max, max, dtype,
name=input_<path>)``; non-tensor inputs are passed as they are (keywords stay keywords).

The artifact's format belongs to Torch-TensorRT: aitune verifies its hash (the checkpoint layer
does) and loads it only through ``torch_tensorrt.load(...).module()``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import Any, Iterator

import torch

from aitune._native import _C
from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend.backend import ArtifactPath, Backend, BackendState
from aitune.torch.backend.export_shapes import (
    _BATCH,
    _NAMED,
    ExportShapePlan,
    _identifier,
    build_dynamic_shapes,
    prepare_export_sample,
    var_keyword_names,
)
from aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend import make_export_adapter
from aitune.torch.backend.torch_tensorrt_aot.torch_tensorrt_aot_config import TorchTensorRTAotBackendConfig
from aitune.torch.backend.torch_tensorrt_config import (
    import_torch_tensorrt,
    settings_overrides,
    settings_precision_class,
    torch_tensorrt_availability,
)
from aitune.torch.module.graph_spec import GraphSpec
from aitune.torch.module.tree import canonical_call, map_tensors

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


class TorchTensorRTAotBackend(Backend):
    config_class = TorchTensorRTAotBackendConfig
    _devices = ("cuda",)

    def __init__(self, config: TorchTensorRTAotBackendConfig | None = None, *, tolerance: Any = None) -> None:
        super().__init__(config, tolerance=tolerance)
        self._program: Any = None  # the loaded module (torch_tensorrt.load(...).module())
        self._artifact: ArtifactPath | None = None
        self._params: list | None = None
        self._signature: Any = None
        self._profile: list[tuple[list[int], list[int]]] | None = None

    # -- identity (is_jit is the base class's False) --------------------------------------------
    @property
    def precision_class(self) -> str:
        return settings_precision_class(self.config.compile_config) or "fp32"

    def is_available(self) -> tuple[bool, str]:
        return torch_tensorrt_availability()

    @property
    def artifact_path(self) -> Path | None:
        return self._artifact.path if self._artifact is not None else None

    def _artifacts(self) -> dict[str, Any]:
        return {ARTIFACT_KEY: self._artifact}

    def input_profile(self) -> list[tuple[list[int], list[int | None]]] | None:
        """The single Input range per graph tensor input (graph.input_spec.tensors order)."""
        if self._profile is None:
            return super().input_profile()
        return [(list(low), list(high)) for low, high in self._profile]

    # -- build -------------------------------------------------------------------------------
    def _build(self, module: torch.nn.Module, graph_spec: Any, data: list, device: torch.device,
               cache_dir: Path) -> None:
        trt = import_torch_tensorrt()
        if trt is None:
            raise BackendUnavailableError(torch_tensorrt_availability()[1])
        graph: GraphSpec = graph_spec
        if not data:
            raise ValueError(f"{self.name} needs a recorded sample of graph {graph.name} to export it")
        module.to(device)
        plan = NamedDimsPlan(graph)
        args, kwargs = prepare_export_sample(graph, data[0], plan)
        exported = self._export(module, graph, data[0], plan, args, kwargs)
        arg_inputs, kwarg_inputs = self.compile_inputs(trt, graph, plan, args, kwargs)
        settings = settings_overrides(self.config.compile_config)
        with torch.no_grad():
            compiled = trt.dynamo.compile(exported, arg_inputs=arg_inputs, kwarg_inputs=kwarg_inputs, device=device,
                                          **settings)
        path = Path(cache_dir) / EXPORTED_MODEL_NAME
        # No inputs: with retrace=False Torch-TensorRT serialises the compiled graph as it is, and
        # 2.11 checks any inputs it is given before it looks at retrace, refusing the None, float
        # and bool values ordinary calls carry (docs/guide.md, Torch-TensorRT backends).
        trt.save(compiled, str(path), output_format="exported_program", retrace=False,
                 pickle_protocol=self.config.pickle_protocol)
        del compiled, exported
        self._artifact = ArtifactPath.from_existing(path, Path(cache_dir))
        self._profile = [plan.input_range(_as_tuple(t.semantic_path)) for t in graph.input_spec.tensors]
        self._bind_graph(graph)
        self._load(trt)

    def _export(self, module: torch.nn.Module, graph: GraphSpec, sample: Any, plan: NamedDimsPlan, args: tuple,
                kwargs: dict) -> Any:
        adapter = make_export_adapter(module, var_keyword_names=var_keyword_names(graph, sample))
        dynamic_shapes = build_dynamic_shapes(graph, sample, plan)
        with torch.no_grad():
            try:
                return torch.export.export(adapter, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
            except Exception as e:  # noqa: BLE001 - e.g. two named dims the model proves equal
                if dynamic_shapes == build_dynamic_shapes(graph, sample):
                    raise
                logger.info("%s (graph '%s'): export with named dims failed (%s: %s); exporting with automatic "
                            "dims for the recorded dim axes", self.name, graph.name, type(e).__name__,
                            str(e).splitlines()[0] if str(e) else "")
                return torch.export.export(adapter, args, kwargs, dynamic_shapes=build_dynamic_shapes(graph, sample),
                                           strict=False)

    @staticmethod
    def compile_inputs(trt: Any, graph: GraphSpec, plan: NamedDimsPlan, args: tuple,
                       kwargs: dict) -> tuple[list, dict]:
        """(arg_inputs, kwarg_inputs) for torch_tensorrt.dynamo.compile: the export call with
        each tensor replaced by its Input range (opt = max) and nothing else. torch.export made
        the non-tensor arguments constants of the program, so they are no engine inputs; 2.11
        refuses a str among the inputs and turns a float or bool into a 0-d tensor input
        (docs/guide.md). A positional non-tensor leaves None to keep the positions; a keyword
        without a tensor is left out."""
        bound = _C.Signature(graph.forward_params).bind(tuple(args), dict(kwargs))

        def to_input(path: tuple, tensor: torch.Tensor) -> Any:
            low, high = plan.input_range(path) if path in plan.axes else (list(tensor.shape), list(tensor.shape))
            return trt.Input(min_shape=low, opt_shape=high, max_shape=high, dtype=tensor.dtype, name=input_name(path))

        arg_inputs, kwarg_inputs = canonical_call(graph.forward_params, map_tensors(bound, to_input))
        specs = {name: _input_spec(value, trt.Input) for name, value in kwarg_inputs.items()}
        return ([_input_spec(value, trt.Input) for value in arg_inputs],
                {name: spec for name, spec in specs.items() if _holds_input(spec, trt.Input)})

    def _bind_graph(self, graph: GraphSpec) -> None:
        self._params = graph.forward_params
        self._signature = _C.Signature(graph.forward_params)

    def _load(self, trt: Any = None) -> None:
        trt = trt or import_torch_tensorrt()
        if trt is None:
            raise BackendUnavailableError(torch_tensorrt_availability()[1])
        with _repaired_torch_export_fallback_warning():
            self._program = trt.load(str(self._artifact.path)).module()

    @classmethod
    def from_checkpoint(cls, config: TorchTensorRTAotBackendConfig, artifacts: dict[str, Path], graph: GraphSpec,
                        device: Any) -> TorchTensorRTAotBackend:
        """An active backend serving a checkpoint's extracted (hash-verified) exported_model.pt."""
        backend = cls(config)
        backend._device = torch.device(device)
        path = Path(artifacts[ARTIFACT_KEY])
        backend._artifact = ArtifactPath.from_existing(path, path.parent)
        backend._bind_graph(graph)
        backend._graph_spec = graph
        backend._load()
        backend._state = BackendState.ACTIVE
        backend._start_cuda_graphs()
        return backend

    # -- serving -----------------------------------------------------------------------------
    def _infer(self, *args: Any, **kwargs: Any) -> Any:
        if self._signature is not None:  # the exported program takes the canonical layout
            args, kwargs = canonical_call(self._params, self._signature.bind(tuple(args), dict(kwargs)))
        with torch.no_grad():
            return self._program(*args, **kwargs)

    def _activate(self) -> None:
        if self._program is None and self._artifact is not None:
            self._load()

    def _deactivate(self) -> None:
        self._program = None  # holds the engines; activation loads the saved program again
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _input_spec(value: Any, input_class: type) -> Any:
    """`value` with its Inputs kept, in the containers Torch-TensorRT takes (lists, tuples, dicts;
    a dataclass as the dict of its fields), and every other leaf None."""
    if isinstance(value, input_class):
        return value
    if isinstance(value, (list, tuple)):
        items = [_input_spec(item, input_class) for item in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {key: _input_spec(item, input_class) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _input_spec(getattr(value, f.name), input_class) for f in dataclasses.fields(value)}
    return None


def _holds_input(spec: Any, input_class: type) -> bool:
    if isinstance(spec, input_class):
        return True
    items = spec.values() if isinstance(spec, dict) else spec if isinstance(spec, (list, tuple)) else ()
    return any(_holds_input(item, input_class) for item in items)


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
