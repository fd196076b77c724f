"""TorchInductorAotBackend: torch.export + AOTInductor package `model.pt2`, served by the native
runner aitune._C.AotiRunner (docs/reference/backends.md#per-backend-behaviour).

Export traces the module's ORIGINAL forward through a small adapter module whose `forward` has
the original signature (the wrapped module's instance `forward` is aitune's router), with the
dynamic shapes and export sample of :mod:`aitune.torch.backend.common.export_shapes`.

Input order. AOTInductor takes the exported program's tensor inputs in pytree order of the
canonical (args, kwargs) (its in_spec). aitune flattens calls its own way
(docs/reference/recording.md#binding-flattening-and-names: dict keys sorted, parameters in signature order).
:meth:`_native_plan` gives the dispatcher the mapping between the two, computed once by matching paths; non-tensor
inputs are baked into the export. Outputs come flat in pytree order of the program's out_spec and
are rebuilt by the shared OutputStructure (backend/common/serving_plan.py).
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Callable

import torch
import torch.utils._pytree as pytree

from aitune.torch.backend.common.compile_caches import keep_compile_caches_in_aitune
from aitune.torch.backend.common.jit_warmup import original_forward
from aitune._native import _C
from aitune.exceptions import AITuneUserInputError
from aitune.torch.backend.backend import ArtifactPath, Backend, OutputStructure, ServingPlan
from aitune.torch.backend.registry import register_backend
from aitune.torch.backend.common.export_shapes import (
    ExportShapePlan,
    build_dynamic_shapes,
    prepare_export_sample,
    var_keyword_names,
)
from aitune.torch.backend.torch_inductor_aot import cpu_isa, load_check
from aitune.torch.backend.torch_inductor_aot.input_order import input_order, leaf_paths, spec_paths
from aitune.torch.backend.torch_inductor_aot.global_libstdcxx import promote_libstdcxx
from aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_config import TorchInductorAotBackendConfig
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.graph.tree import canonical_call
from aitune.torch.validation import NumericTolerance

PACKAGE_NAME = "model.pt2"
NUM_INPUTS_METADATA_KEY = _C.AOTI_NUM_INPUTS_METADATA_KEY  # the C++ runner reads it (AotiRunner::kNumInputsMetadataKey)
LOAD_PROBE_ENV = load_check.LOAD_PROBE_ENV  # 0: no load check (load_check.py)


def _device_index(device: torch.device) -> int:
    """AotiRunner's device index: -1 for the CPU."""
    if device.type != "cuda":
        return -1
    return device.index if device.index is not None else torch.cuda.current_device()


def _file_stamp(path: Path) -> str:
    st = os.stat(path)
    return f"{st.st_size} {st.st_ino} {st.st_dev} {st.st_mtime_ns} {st.st_ctime_ns}"


def probe_package_load_once(path: Path, device_index: int = -1, graph: GraphSpec | None = None) -> None:
    """The load check (load_check.py) of a package loaded from a checkpoint, its first call made
    on the graph's first stored sample (zeros of the recorded minimum shapes without one): a
    damaged or hostile library with valid hashes becomes a CorruptCheckpointError instead of
    taking the process down or stalling it. The check costs a child process (a few seconds), so
    a passed one is remembered beside the extracted file, keyed by the file's stamp (any write to
    the file changes it) and whether the first call was made; in a read-only cache it runs on
    every load. First, without running native code, a CPU package compiled for instructions this
    CPU lacks is refused (cpu_isa.py): an AVX-512 package would die of SIGILL on an AVX2 CPU."""
    cpu_isa.check_cpu_package(path)
    if not load_check.enabled():
        return
    marker = path.with_name(path.name + f".probed-{device_index}")
    stamp = _file_stamp(path) + ("\nfirst call" if graph is not None else "")
    try:
        if marker.read_text() in (stamp, _file_stamp(path) + "\nfirst call"):
            return
    except OSError:
        pass
    sample = graph.samples[0] if graph is not None and graph.samples else None
    load_check.check_package(path, device_index, graph, sample, from_checkpoint=True)
    try:
        marker.write_text(stamp)
    except OSError:
        pass  # read-only cache: checked again next time


def probe_package_load(
    path: Path | str,
    device_index: int = -1,
    timeout_s: float | None = None,
    graph: GraphSpec | None = None,
    sample: Sample | None = None,
) -> None:
    """The load check (load_check.py) of a package just built: loaded in a child process and,
    with `graph`, called there once on `sample`. A package whose load or first call crashes or
    hangs (seen with some compiler/libstdc++ combinations: the generated model library faults in
    its constructor) would otherwise take the tuning process down; here it is a RuntimeError."""
    load_check.check_package(Path(path), device_index, graph, sample, from_checkpoint=False, timeout_s=timeout_s)


class _ForwardAdapter(torch.nn.Module):
    """Holds the module (so its parameters and buffers are the exported program's) and calls
    its original forward; subclassed per build with that forward's signature."""

    def __init__(self, module: torch.nn.Module, forward: Callable) -> None:
        super().__init__()
        self.module = module
        object.__setattr__(self, "_aitune_forward", forward)


def make_export_adapter(
    module: torch.nn.Module, forward: Callable | None = None, var_keyword_names: list[str] | None = None
) -> torch.nn.Module:
    """A module whose forward is `forward` (default: the module's original forward), with the
    same signature, for torch.export. `var_keyword_names` replace a ``**kwargs`` parameter by
    keyword-only parameters of those names (torch.export cannot put dynamic shapes under
    ``**kwargs``); calls still reach `forward` with the same keywords."""
    if forward is None:
        forward = original_forward(module)

    def adapter_forward(self: _ForwardAdapter, *args: object, **kwargs: object) -> object:
        return self._aitune_forward(*args, **kwargs)

    signature = inspect.signature(forward)
    params = []
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD and var_keyword_names is not None:
            params.extend(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in var_keyword_names)
        else:
            params.append(param)
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    adapter_forward.__signature__ = signature.replace(parameters=[self_param, *params])  # type: ignore[attr-defined]
    cls = type(f"AITuneExport_{type(module).__name__}", (_ForwardAdapter,), {"forward": adapter_forward})
    return cls(module, forward)


@register_backend("torch_inductor_aot")
class TorchInductorAotBackend(Backend):
    config_class = TorchInductorAotBackendConfig
    _build_cost = 1.5  # export, then Inductor with a C++ compile of the whole program
    restores_from_artifacts = True

    def __init__(
        self, config: TorchInductorAotBackendConfig | None = None, *, tolerance: NumericTolerance | None = None
    ) -> None:
        super().__init__(config, tolerance=tolerance)
        self._runner: _C.AotiRunner | None = None
        self._package: ArtifactPath | None = None
        self._in_spec: pytree.TreeSpec | None = None
        self._outputs: OutputStructure | None = None  # the program's output structure (out_spec)
        self._in_paths: list[tuple] = []  # per in_spec leaf, raw call path
        self._params: list | None = None  # forward signature, when built from a graph
        self._signature: _C.Signature | None = None
        self._input_order: list[int] | None = None
        self._profile_slots: list[tuple[list[int], list[int | None]] | None] | None = None
        self._run_device: torch.device | None = None

    # -- identity ----------------------------------------------------------------------------
    # is_jit (False) and precision_class ("fp32") are the base class's.
    def is_available(self) -> tuple[bool, str]:
        if not hasattr(torch._inductor, "aoti_compile_and_package") or not hasattr(_C, "AotiRunner"):
            return False, "AOTInductor packaging needs torch >= 2.6 and aitune built with its AOTInductor runner."
        return True, ""

    @property
    def package_path(self) -> Path | None:
        return self._package.path if self._package is not None else None

    def _artifacts(self) -> dict[str, ArtifactPath | None]:
        return {"package": self._package}

    # -- build -------------------------------------------------------------------------------
    def _build(
        self, module: torch.nn.Module, graph_spec: GraphSpec, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        if not data:
            raise ValueError(f"TorchInductorAotBackend needs a recorded sample of graph {graph_spec.name} to export it")
        graph: GraphSpec = graph_spec
        keep_compile_caches_in_aitune()
        module.to(device)
        plan = ExportShapePlan(graph)
        # Declared DynamicDims are range hints: a named spatial Dim fails export on ResNet-like
        # models (export_shapes.ExportShapePlan._dims); the package still accepts the declared range.
        dynamic_shapes = build_dynamic_shapes(graph, data[0], plan, hint_dynamic_dims=True)
        args, kwargs = prepare_export_sample(graph, data[0], plan)
        adapter = make_export_adapter(module, var_keyword_names=var_keyword_names(graph, data[0]))
        with torch.no_grad():
            exported = torch.export.export(adapter, args, kwargs, dynamic_shapes=dynamic_shapes)
        num_inputs = sum(1 for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor))
        inductor_configs = self.config.merged_inductor_configs()
        metadata = dict(inductor_configs.get("aot_inductor.metadata") or {})
        metadata[NUM_INPUTS_METADATA_KEY] = str(num_inputs)
        inductor_configs["aot_inductor.metadata"] = metadata
        package_path = Path(cache_dir) / PACKAGE_NAME
        written = torch._inductor.aoti_compile_and_package(
            exported, package_path=str(package_path), inductor_configs=inductor_configs
        )
        self._package = ArtifactPath.from_existing(Path(written), Path(cache_dir))
        self._profile_slots = _slot_profiles(exported)
        del exported
        self._params = graph.forward_params
        self._signature = _C.Signature(graph.forward_params)
        if load_check.enabled():
            probe_package_load(self._package.path, _device_index(device), graph=graph, sample=data[0])
        self._load(self._package.path, device)
        self._input_order = self.compute_input_order(graph)
        if len(self._input_order) != num_inputs:
            raise RuntimeError(
                f"AOTInductor package of graph {graph.name} takes {num_inputs} tensor input(s) but "
                f"{len(self._input_order)} matched the graph's tensor inputs"
            )

    def _load(self, path: Path, device: torch.device, probe_once: bool = False, graph: GraphSpec | None = None) -> None:
        index = _device_index(device)
        if probe_once:
            probe_package_load_once(Path(path), index, graph)
        promote_libstdcxx()  # see global_libstdcxx.py: packages can crash without it
        self._adopt_runner(_C.AotiRunner.load(str(path), index))

    def _adopt_runner(self, runner: _C.AotiRunner) -> None:
        """Serves through a loaded aitune._C.AotiRunner (its call spec gives the input paths)."""
        self._runner = runner
        in_spec, out_spec = self._runner.call_spec
        self._in_spec = pytree.treespec_loads(in_spec)
        self._outputs = OutputStructure.of_treespec(pytree.treespec_loads(out_spec))
        self._in_paths = spec_paths(self._in_spec)
        self._run_device = torch.device(self._runner.device)

    def _restore(self, artifacts: dict[str, Path], graph: GraphSpec, device: torch.device) -> None:
        """A checkpoint's extracted `model.pt2` (ait.load): loaded and called once in a child
        process first (once per extracted file), since the package's library is native code."""
        self._open_package(Path(artifacts["package"]), device, graph, probe_once=True)

    def _open_package(self, path: Path, device: torch.device, graph: GraphSpec | None, probe_once: bool) -> None:
        self._package = ArtifactPath.from_existing(path, path.parent)
        self._load(path, device, probe_once=probe_once, graph=graph)
        if graph is not None:
            self._params = graph.forward_params
            self._signature = _C.Signature(graph.forward_params)
            self._input_order = self.compute_input_order(graph)

    # -- input order -------------------------------------------------------------------------
    def compute_input_order(self, graph: GraphSpec) -> list[int]:
        """For each AOTInductor input position, the index of the graph tensor leaf (in
        graph.input_spec.tensors order) that feeds it."""
        return input_order(self._in_paths, graph)

    def _native_plan(self) -> ServingPlan | None:
        """The bound aitune._C.AotiRunner, served without Python: input_order[k] is the index, among
        the graph's tensor input leaves in aitune's flattening order, of the tensor that feeds
        AOTInductor input k; outputs go back into the program's output structure. None while the
        package is not loaded, or when it was loaded without its graph (input order unknown). With
        use_cuda_graphs the shared CUDA-graph runner wraps this runner directly."""
        if self._runner is None or self._input_order is None or self._outputs is None:
            return None
        return ServingPlan(self._infer, self._runner, tuple(self._input_order), self._outputs)

    def input_profile(self) -> list[tuple[list[int], list[int | None]]] | None:
        """Per graph tensor input (graph.input_spec.tensors order): (min shape, max shape)
        the package accepts; None in a max shape means no upper bound (docs/reference/backends.md#per-backend-behaviour
        profile)."""
        slots = self._profile_slots
        if slots is None or self._input_order is None:
            return super().input_profile()
        tensor_slots = [s for s in slots if s is not None]
        if len(tensor_slots) != len(self._input_order):
            return None
        profile: list[tuple[list[int], list[int | None]] | None] = [None] * len(self._input_order)
        for position, leaf in enumerate(self._input_order):
            profile[leaf] = tensor_slots[position]
        return profile

    # -- serving -----------------------------------------------------------------------------
    def _flat_inputs(self, args: tuple, kwargs: dict) -> list[torch.Tensor]:
        if self._signature is not None:
            args, kwargs = canonical_call(self._params, self._signature.bind(tuple(args), dict(kwargs)))
        by_path = dict(leaf_paths((tuple(args), dict(kwargs))))
        device = self._run_device
        inputs = []
        for path in self._in_paths:
            if path not in by_path:
                raise AITuneUserInputError(
                    f"{self.name}: the call has no input at {path!r}, which the exported program takes"
                )
            value = by_path[path]
            if isinstance(value, torch.Tensor):
                if value.device != device:
                    value = value.to(device)
                inputs.append(value)
        return inputs

    def _infer(self, *args: object, **kwargs: object) -> object:
        inputs = self._flat_inputs(args, kwargs)
        with torch.no_grad():
            outputs = self._runner.run(inputs)
        return self._outputs.rebuild(outputs)

    def _activate(self) -> None:
        if self._runner is None and self._package is not None and self._device is not None:
            self._load(self._package.path, self._device)

    def _deactivate(self) -> None:
        # The runner holds the package's weights: release it (a dispatcher built from the
        # serving plan keeps its own reference until it is rebuilt); activation reloads.
        self._runner = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _slot_profiles(exported: torch.export.ExportedProgram) -> list[tuple[list[int], list[int | None]] | None]:
    """Per in_spec leaf: (min, max) shape for tensor inputs from the export's range
    constraints, None for non-tensor inputs."""
    try:
        from torch.utils._sympy.value_ranges import bound_sympy
    except ImportError:  # pragma: no cover
        return []
    user_inputs = set(exported.graph_signature.user_inputs)
    ranges = exported.range_constraints
    slots: list[tuple[list[int], list[int | None]] | None] = []
    for node in exported.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            slots.append(None)
            continue
        low, high = [], []
        for size in val.shape:
            if isinstance(size, int):
                low.append(size)
                high.append(size)
                continue
            expr = size.node.expr
            try:
                bounds = bound_sympy(expr, ranges)
                lower = int(bounds.lower)
                upper = bounds.upper
                upper = int(upper) if upper.is_finite else None
            except Exception:  # noqa: BLE001 - unknown bound: accept anything
                lower, upper = 0, None
            low.append(lower)
            high.append(upper)
        slots.append((low, high))
    return slots
