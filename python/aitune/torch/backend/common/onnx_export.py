"""ONNX export of one graph, shared by the TensorRT and ONNX Runtime backends
(docs/reference/tensorrt.md#build-pipelines).

The exporters never see aitune's call structure. They trace a small adapter whose forward
takes the graph's tensor leaves as flat positional inputs (graph.input_spec.tensors order, named
``input_<path>``), puts them back into the recorded call (non-tensor leaves are baked in from the
sample), calls the module's ORIGINAL forward and returns the output's tensor leaves as a flat
tuple (named ``output_<path>``, in the output's flattening order). Nested dicts, tuples,
dataclasses, ``*args`` and ``**kwargs`` therefore all export the same way, and ONNX input names
never depend on how an exporter flattens containers.

Files are written into a staging folder next to `path` and moved into place only once the
model passed ``onnx.checker``, so a failed export leaves neither ``.onnx`` nor ``.data`` behind.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import re
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

from aitune.torch.backend.common.jit_warmup import original_forward
from aitune._native import _C
from aitune.torch.backend.common.export_shapes import ExportShapePlan, prepare_export_sample
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.graph.locator import semantic_path, tensor_name
from aitune.torch.graph.tree import canonical_call, map_tensors
from aitune.torch.utils.tensors import to_device

logger = logging.getLogger("aitune")

# A protobuf file cannot exceed 2 GiB; weights above this go to `<name>.data` (margin for the graph).
EXTERNAL_DATA_THRESHOLD_BYTES = 2 * 1024**3 - 64 * 1024**2
DYNAMO_EXPORT_ADVICE = (
    "Troubleshooting: the model may not be traceable by torch.export (e.g. data-dependent control flow). "
    "Try disabling Dynamo export with `use_dynamo=False` in the backend config, e.g. "
    "TensorRTBackendConfig(use_dynamo=False) or ONNXRuntimeBackendConfig(use_dynamo=False), which uses the "
    "TorchScript-trace exporter."
)
SCRIPT_EXPORT_ADVICE = (
    "Troubleshooting: the TorchScript tracer may not support an operation of the model; try the dynamo "
    "exporter (`use_dynamo=True`, the default)."
)
_MAX_ERROR_CHARS = 4000
_NAME_CLEANUP = re.compile(r"[^A-Za-z0-9_]+")


@dataclasses.dataclass(frozen=True)
class OnnxExportInfo:
    path: Path  # the .onnx file written
    input_names: list[str]  # graph inputs present in the model, in graph_spec.input_spec.tensors order
    input_leaf_indices: list[int]  # for each input_names[i], its index among the graph's tensor leaves
    output_names: list[str]  # ONNX output names in output-leaf order
    dynamic_axes: dict[str, dict[int, str]]  # input name -> {axis: dim label}


def onnx_input_name(path_str: Any) -> str:
    """``input_<path>`` (docs/reference/recording.md#binding-flattening-and-names): every run of characters outside
    [A-Za-z0-9_] becomes ``_``. Takes a semantic path (``"x"``, ``("options", "mask")``) or an access path string
    (``options["mask"]``); both give the same name."""
    if isinstance(path_str, tuple):
        return tensor_name(path_str, "input")
    return "input_" + _NAME_CLEANUP.sub("_", str(path_str)).strip("_")


def _key(path: Any) -> tuple:
    return path if isinstance(path, tuple) else (path,)


def output_leaf_paths(output: Any) -> list[tuple]:
    """Key paths of the tensor leaves of a forward output, in aitune's flattening order."""
    _, leaves = _C.flatten_value(output)
    return [_key(semantic_path(leaf.path)) if leaf.path else () for leaf in leaves if leaf.is_tensor]


def output_names_for(paths: list[tuple]) -> list[str]:
    names = [tensor_name(() if p == () else (p[0] if len(p) == 1 else p), "output") for p in paths]
    _check_unique(names, "output")
    return names


def collect_tensors(obj: Any) -> dict[tuple, torch.Tensor]:
    found: dict[tuple, torch.Tensor] = {}

    def keep(path: tuple, tensor: torch.Tensor) -> torch.Tensor:
        found[path] = tensor
        return tensor

    map_tensors(obj, keep)
    return found


def _check_unique(names: list[str], side: str) -> None:
    seen: dict[str, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    clashes = sorted(n for n, c in seen.items() if c > 1)
    if clashes:
        raise ValueError(
            f"Cannot name the ONNX {side}s: several {side} paths map to the same tensor name {clashes}; "
            "expected one name per tensor (rename the dict keys or attributes that differ only in punctuation)"
        )


class _FlatForward(torch.nn.Module):
    """Holds the module (its parameters become the model's initializers) and calls `forward`
    on the recorded call rebuilt from flat tensors; subclassed per export with a signature whose
    parameters are the ONNX input names."""

    def __init__(
        self,
        module: torch.nn.Module,
        forward: Callable,
        params: list,
        bound_template: dict,
        input_paths: list[tuple],
        output_paths: list[tuple],
    ) -> None:
        super().__init__()
        self.module = module
        object.__setattr__(self, "_aitune_forward", forward)
        self._params = params
        self._bound_template = bound_template
        self._input_paths = input_paths
        self._output_paths = output_paths

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        by_path = dict(zip(self._input_paths, tensors))
        bound = map_tensors(self._bound_template, lambda path, t: by_path.get(path, t))
        args, kwargs = canonical_call(self._params, bound)
        found = collect_tensors(self._aitune_forward(*args, **kwargs))
        return tuple(found[path] for path in self._output_paths)


def _flat_adapter(names: list[str], *init_args: Any) -> torch.nn.Module:
    def forward(self: Any, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return _FlatForward.forward(self, *tensors)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names]
    forward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    cls = type("AITuneOnnxExport", (_FlatForward,), {"forward": forward})
    return cls(*init_args)


def _module_device(module: torch.nn.Module) -> torch.device:
    for tensor in (*module.parameters(), *module.buffers()):
        if tensor.device.type != "meta":
            return tensor.device
    return torch.device("cpu")


def _weights_bytes(module: torch.nn.Module) -> int:
    seen: set[int] = set()
    total = 0
    for tensor in (*module.parameters(), *module.buffers()):
        if id(tensor) not in seen:
            seen.add(id(tensor))
            total += tensor.numel() * tensor.element_size()
    return total


def script_dynamic_axes(graph: GraphSpec, plan: ExportShapePlan, names: list[str]) -> dict[str, dict[int, str]]:
    """`dynamic_axes` of the TorchScript exporter: every axis whose min != max (and every axis
    declared with DynamicDim), labelled with the explicit dim name, else ``batch<i>`` / ``dim<i>``.
    Labels equal across inputs mean equal sizes to ONNX Runtime and TensorRT, so a batch axis
    with a multiplier m != 1 is ``batch<i>x<m>`` and a ``dim<i>`` found on several inputs is
    prefixed with the input name."""
    labels: dict[str, dict[int, str]] = {}
    dim_users: dict[int, int] = {}
    for leaf in graph.input_spec.tensors:
        for i, axis in enumerate(plan.axes.get(_key(leaf.semantic_path), [])):
            if axis.kind == "dim" and leaf.spec.min_shape[i] != leaf.spec.max_shape[i]:
                dim_users[i] = dim_users.get(i, 0) + 1
    for leaf, name in zip(graph.input_spec.tensors, names):
        axes = plan.axes.get(_key(leaf.semantic_path), [])
        entry: dict[int, str] = {}
        for i, axis in enumerate(axes):
            if axis.kind == "named":
                entry[i] = axis.definition.name
            elif leaf.spec.min_shape[i] == leaf.spec.max_shape[i]:
                continue
            elif axis.kind == "batch":
                entry[i] = f"batch{i}" if axis.multiplier == 1 else f"batch{i}x{axis.multiplier}"
            else:
                entry[i] = f"dim{i}" if dim_users.get(i, 0) <= 1 else f"{name}_dim{i}"
        if entry:
            labels[name] = entry
    return labels


def _dynamo_dynamic_shapes(graph: GraphSpec, plan: ExportShapePlan) -> tuple | None:
    if not plan.is_dynamic():
        return None
    batch_dim, named = plan._dims()  # one shared batch Dim and one Dim per explicit name
    return tuple(
        plan.tensor_dynamic_shape(_key(leaf.semantic_path), batch_dim, named) for leaf in graph.input_spec.tensors
    )


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + " …(truncated)"


def _remove_outputs(path: Path) -> None:
    for candidate in (path, path.with_name(path.name + ".data")):
        candidate.unlink(missing_ok=True)


def _move_into_place(staged: Path, path: Path, large: bool) -> None:
    """Moves the staged model (and its `.data`) to `path`. Exporters that wrote weights to other
    files (the TorchScript exporter writes one file per tensor above 2 GB) are re-saved with all
    weights in one `<name>.data`, so the artifact is always one or two files."""
    import onnx

    data_name = staged.name + ".data"
    extra = [f for f in staged.parent.iterdir() if f.name not in (staged.name, data_name)]
    if extra or (large and not (staged.parent / data_name).exists()):
        model = onnx.load(str(staged), load_external_data=True)
        onnx.save_model(
            model, str(path), save_as_external_data=large, all_tensors_to_one_file=True, location=path.name + ".data"
        )
        return
    shutil.move(str(staged), str(path))
    if (staged.parent / data_name).exists():
        shutil.move(str(staged.parent / data_name), str(path.with_name(path.name + ".data")))


def export_onnx(
    module: torch.nn.Module,
    graph_spec: GraphSpec,
    samples: list[Sample],
    path: Path,
    *,
    use_dynamo: bool = True,
    opset_version: int | None = None,
    forward: Callable | None = None,
) -> OnnxExportInfo:
    """Exports `graph_spec` of `module` to `path` (docs/reference/tensorrt.md#build-pipelines) and checks it with
    onnx.checker. Raises RuntimeError naming the exporter that failed; partial outputs are removed."""
    info, _ = export_onnx_with_template(
        module, graph_spec, samples, path, use_dynamo=use_dynamo, opset_version=opset_version, forward=forward
    )
    return info


def export_onnx_with_template(
    module: torch.nn.Module,
    graph_spec: GraphSpec,
    samples: list[Sample],
    path: Path,
    *,
    use_dynamo: bool = True,
    opset_version: int | None = None,
    forward: Callable | None = None,
) -> tuple[OnnxExportInfo, Any]:
    """export_onnx, plus the forward's output on the export sample with every tensor replaced by
    an empty placeholder: the structure to rebuild ONNX outputs into (serving_plan.OutputStructure.of)."""
    if not samples:
        raise ValueError(f"ONNX export of graph '{graph_spec.name}' needs at least one recorded sample, got none")
    path = Path(path)
    forward = forward or original_forward(module)
    graph = graph_spec
    leaves = graph.input_spec.tensors
    names = [onnx_input_name(leaf.semantic_path) for leaf in leaves]
    _check_unique(names, "input")
    input_paths = [_key(leaf.semantic_path) for leaf in leaves]

    plan = ExportShapePlan(graph)
    args, kwargs = prepare_export_sample(graph, samples[0], plan)
    device = _module_device(module)
    args, kwargs = to_device((args, kwargs), device)
    bound = _C.Signature(graph.forward_params).bind(tuple(args), dict(kwargs))
    by_path = collect_tensors(bound)
    missing = [p for p in input_paths if p not in by_path]
    if missing:
        raise ValueError(
            f"ONNX export of graph '{graph.name}': the sample has no tensor at {missing}; expected "
            f"the graph's inputs {graph.input_spec.describe_structure()}"
        )
    flat = tuple(by_path[p] for p in input_paths)

    with torch.no_grad():
        eager_output = forward(*args, **kwargs)
    output_paths = output_leaf_paths(eager_output)
    if not output_paths:
        raise ValueError(
            f"ONNX export of graph '{graph.name}': the forward returns no tensor, so there is nothing to export"
        )
    output_names = output_names_for(output_paths)
    template = map_tensors(eager_output, lambda _p, _t: torch.empty(0))
    del eager_output

    adapter = _flat_adapter(names, module, forward, graph.forward_params, bound, input_paths, output_paths)
    adapter.training = module.training  # the flag only: .eval() would also switch the user's module
    large = _weights_bytes(module) > EXTERNAL_DATA_THRESHOLD_BYTES
    exporter = (
        "dynamo exporter (torch.onnx.export(dynamo=True))"
        if use_dynamo
        else "TorchScript exporter (torch.onnx.export(dynamo=False))"
    )
    staging = path.parent / f".{path.name}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    staged = staging / path.name
    _remove_outputs(path)
    try:
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter's notice
                if use_dynamo:
                    _run_dynamo(
                        adapter,
                        flat,
                        staged,
                        names,
                        output_names,
                        opset_version,
                        _dynamo_dynamic_shapes(graph, plan),
                        large,
                    )
                else:
                    torch.onnx.export(
                        adapter,
                        flat,
                        str(staged),
                        dynamo=False,
                        input_names=names,
                        output_names=output_names,
                        opset_version=opset_version,
                        dynamic_axes=script_dynamic_axes(graph, plan, names) or None,
                    )
        except Exception as e:
            advice = DYNAMO_EXPORT_ADVICE if use_dynamo else SCRIPT_EXPORT_ADVICE
            raise RuntimeError(
                f"ONNX export of graph '{graph.name}' with the {exporter} failed: {_short(e)}\n{advice}"
            ) from e
        _move_into_place(staged, path, large)
        try:
            import onnx

            onnx.checker.check_model(str(path))  # by path: works with external data above 2 GB
        except Exception as e:
            raise RuntimeError(
                f"onnx.checker rejected the model that the {exporter} wrote for graph '{graph.name}': {_short(e)}"
            ) from e
        info = _read_info(path, names, output_names, graph.name)
    except BaseException:
        _remove_outputs(path)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.debug("Exported graph %s to %s with inputs %s", graph.name, path, info.input_names)
    return info, template


def _run_dynamo(
    adapter: torch.nn.Module,
    flat: tuple,
    staged: Path,
    names: list[str],
    output_names: list[str],
    opset_version: int | None,
    dynamic_shapes: tuple | None,
    large: bool,
) -> None:
    options: dict[str, Any] = dict(
        dynamo=True,
        input_names=names,
        output_names=output_names,
        opset_version=opset_version,
        dynamic_shapes=dynamic_shapes,
        external_data=large,
        verbose=False,
        report=False,
    )
    if "fallback" in inspect.signature(torch.onnx.export).parameters:
        options["fallback"] = False  # torch < 2.9 would silently retry with the TorchScript exporter
    torch.onnx.export(adapter, flat, str(staged), **options)


def _read_info(path: Path, names: list[str], output_names: list[str], graph_name: str) -> OnnxExportInfo:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    present = {value.name: value for value in model.graph.input}
    unknown = sorted(set(present) - set(names))
    if unknown:
        raise RuntimeError(
            f"ONNX model of graph '{graph_name}' has inputs {unknown} that are not graph inputs; "
            f"expected a subset of {names}"
        )
    written_outputs = [value.name for value in model.graph.output]
    if len(written_outputs) != len(output_names):
        raise RuntimeError(
            f"ONNX model of graph '{graph_name}' has {len(written_outputs)} outputs "
            f"{written_outputs}; expected {len(output_names)}: {output_names}"
        )
    input_names = [n for n in names if n in present]
    dynamic_axes: dict[str, dict[int, str]] = {}
    for name in input_names:
        dims = present[name].type.tensor_type.shape.dim
        axes = {i: d.dim_param or f"unk{i}" for i, d in enumerate(dims) if not d.HasField("dim_value")}
        if axes:
            dynamic_axes[name] = axes
    return OnnxExportInfo(
        path=path,
        input_names=input_names,
        input_leaf_indices=[names.index(n) for n in input_names],
        output_names=written_outputs,
        dynamic_axes=dynamic_axes,
    )


def model_opset(path: Path) -> int:
    """The default-domain opset a model was written with."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return next(op.version for op in model.opset_import if op.domain in ("", "ai.onnx"))
