"""Numeric comparison of a candidate's outputs with eager's (docs/reference/validation.md). Metrics are
computed by the native comparator on the candidate's device; the pass rule and the message
come from the C++ core."""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from typing import TYPE_CHECKING, Callable, NamedTuple

import torch

from aitune._native import _C
from aitune.exceptions import CorrectnessNumericError
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.graph.locator import access_path, semantic_path
from aitune.torch.utils.tensors import map_nested_tensors
from aitune.torch.task.precise_reference import log_no_precise_reference, native_precision_class, precise_runner
from aitune.torch.validation import DEFAULT_TOLERANCES, NumericTolerance, PrecisionClass

if TYPE_CHECKING:
    from aitune.torch.backend.backend import Backend

logger = logging.getLogger("aitune")


class ReferenceLeaf(NamedTuple):
    """One output leaf of eager's run of a stored sample (host copies)."""

    value: object
    display: str  # the access path shown in messages, e.g. output[0]['logits']
    is_tensor: bool
    # The noise bound's float32 reference (precise_reference.py) and eager's own rel_l2 against
    # it; None where there is none (fp32/int8 classes, non-tensor leaves, or the run failed).
    precise: torch.Tensor | None = None
    eager_rel_l2_vs_precise: float | None = None


def reference_outputs(
    forward: Callable,
    data: list[Sample],
    raw: list[object] | None = None,
    *,
    module: torch.nn.Module | None = None,
    device: torch.device | None = None,
    graph_name: str = "",
) -> list[dict[tuple, ReferenceLeaf]]:
    """Eager outputs of every stored sample, computed once per graph before any candidate,
    without autocast, kept in host memory. `raw` receives the outputs themselves (host copies)
    for checkpoints (`aitune run --check` compares against them). With `module` and `device`, a
    module whose native class has a noise bound also gets the float32 reference of each tensor
    leaf and eager's own error against it (docs/reference/validation.md#the-noise-bound)."""
    precise = precise_runner(module, forward, device) if device is not None else None
    native_tolerance = (
        DEFAULT_TOLERANCES[PrecisionClass(native_precision_class(module, device))] if precise is not None else None
    )
    refs = []
    with torch.no_grad():
        for sample in data:
            args, kwargs = copy.deepcopy((sample.args, sample.kwargs))
            output = forward(*args, **kwargs)
            if raw is not None:
                raw.append(map_nested_tensors(output, lambda t: t.detach().to("cpu", copy=True)))
            _, leaves = _C.flatten_value(output)
            precise_leaves: dict[tuple, torch.Tensor] = {}
            if precise is not None:
                try:
                    _, exact = _C.flatten_value(precise(sample))
                    precise_leaves = {
                        (semantic_path(leaf.path) if leaf.path else ()): leaf.value for leaf in exact if leaf.is_tensor
                    }
                except Exception as e:  # noqa: BLE001 - the bound is then left out for this graph
                    log_no_precise_reference(graph_name, e)
                    precise = None
            ref: dict[tuple, ReferenceLeaf] = {}
            for flat in leaves:
                steps, value, is_tensor = flat.path, flat.value, flat.is_tensor
                path = semantic_path(steps) if steps else ()
                leaf = ReferenceLeaf(_to_host(value), access_path(steps, "output"), is_tensor)
                exact_value = precise_leaves.get(path)
                if is_tensor and exact_value is not None and exact_value.shape == value.shape and native_tolerance:
                    eager_error = _C.compare_tensors(
                        value, exact_value.to(value.device), native_tolerance.atol, native_tolerance.rtol, True
                    )["rel_l2_error"]
                    leaf = leaf._replace(precise=_to_host(exact_value), eager_rel_l2_vs_precise=float(eager_error))
                ref[path] = leaf
            refs.append(ref)
    return refs


def _to_host(value: object) -> object:
    return value.detach().to("cpu", copy=True) if isinstance(value, torch.Tensor) else copy.deepcopy(value)


_CORE_METRIC_KEYS = (
    "max_abs_error",
    "max_rel_error",
    "rel_l2_error",
    "mismatch_fraction",
    "has_nan",
    "numel",
    "rel_l2_vs_precise",
    "eager_rel_l2_vs_precise",
)


@dataclasses.dataclass
class NumericSummary:
    precision_class: str
    tolerance: NumericTolerance
    passed: bool = True
    worst: dict[str, object] = dataclasses.field(default_factory=dict)
    leaves: list[dict[str, object]] = dataclasses.field(default_factory=list)

    def log_line(self) -> str:
        w = self.worst or {"max_abs_error": 0.0, "max_rel_error": 0.0, "rel_l2_error": 0.0, "mismatch_fraction": 0.0}
        t = self.tolerance
        bound = {
            "max_rel_l2": f"rel_l2 ≤ {t.max_rel_l2:g}",
            "max_mismatch_fraction": f"mismatched ≤ {100 * t.max_mismatch_fraction:g}%",
            "noise": f"vs fp32 ≤ {t.max_noise_ratio:g}× eager's + {t.noise_floor:g}",
            "nan": "no NaN",
        }.get(w.get("decided_by", ""), "")
        precise = (
            f", vs fp32={w['rel_l2_vs_precise']:.3g} (eager {w['eager_rel_l2_vs_precise']:.3g})"
            if "rel_l2_vs_precise" in w
            else ""
        )
        return (
            f"🔍 numeric check ({self.precision_class}): max_abs={w['max_abs_error']:.3g}, "
            f"max_rel={w['max_rel_error']:.3g}, rel_l2={w['rel_l2_error']:.3g}, "
            f"mismatched={100 * w['mismatch_fraction']:.3f}%{precise} {'✅' if self.passed else '❌'}"
            + (f" (decided by {bound})" if bound else "")
        )

    def describe(self) -> str:
        """The log line: the worst leaf's metrics, the verdict and the bound that decided it."""
        return self.log_line()


def _bound_use(core: dict[str, float], tolerance: NumericTolerance) -> float:
    """The largest share of a bound the leaf uses (NaN: infinite), to pick the worst leaf."""
    if core["has_nan"] or math.isnan(core["rel_l2_error"]) or math.isnan(core["mismatch_fraction"]):
        return math.inf

    def share(metric: float, bound: float) -> float:
        if bound > 0:
            return metric / bound
        return math.inf if metric > 0 else 0.0

    shares = [
        share(core["rel_l2_error"], tolerance.max_rel_l2),
        share(core["mismatch_fraction"], tolerance.max_mismatch_fraction),
    ]
    if tolerance.max_noise_ratio > 0 and "rel_l2_vs_precise" in core:
        if math.isnan(core["rel_l2_vs_precise"]):
            return math.inf
        limit = tolerance.max_noise_ratio * core["eager_rel_l2_vs_precise"] + tolerance.noise_floor
        shares.append(share(core["rel_l2_vs_precise"], limit))
    return max(shares)


def _scalar_tensor(value: float | int | bool) -> torch.Tensor:
    return torch.tensor(float(value), dtype=torch.float64)


def _noise_metrics(candidate: torch.Tensor, leaf: ReferenceLeaf, tolerance: NumericTolerance) -> dict[str, float]:
    """The noise bound's two metrics for a tensor leaf that has a float32 reference."""
    against_precise = _C.compare_tensors(
        candidate, leaf.precise.to(candidate.device), tolerance.atol, tolerance.rtol, True
    )["rel_l2_error"]
    return {"rel_l2_vs_precise": float(against_precise), "eager_rel_l2_vs_precise": leaf.eager_rel_l2_vs_precise}


def check_numeric(
    infer: Callable,
    graph: GraphSpec,
    data: list[Sample],
    refs: list[list[ReferenceLeaf]],
    tolerance: NumericTolerance,
    precision_class: str,
    noise_check: bool = False,
) -> NumericSummary:
    """Compares the candidate's outputs on every stored sample with eager's (`refs`, from
    reference_outputs). `noise_check`: the candidate computes the model's own precision, so the
    noise bound applies where the references have a float32 run
    (docs/reference/validation.md#the-noise-bound)."""
    summary = NumericSummary(precision_class, tolerance)
    native_tol = tolerance.to_native()
    fp64 = precision_class == "fp32"
    worst_use = -1.0  # the worst leaf uses the largest share of a bound
    with torch.no_grad():
        for index, (sample, ref) in enumerate(zip(data, refs)):
            args, kwargs = copy.deepcopy((sample.args, sample.kwargs))
            output = infer(*args, **kwargs)
            _, leaves = _C.flatten_value(output)
            for flat in leaves:
                steps, value, is_tensor = flat.path, flat.value, flat.is_tensor
                path = semantic_path(steps) if steps else ()
                if path not in ref:
                    continue  # structure problems are reported by the structural check
                leaf = ref[path]
                expected, display, expected_is_tensor = leaf.value, leaf.display, leaf.is_tensor
                if not is_tensor and not isinstance(value, (int, float)) or isinstance(value, bool):
                    if value != expected:
                        summary.passed = False
                        raise CorrectnessNumericError(
                            f"Output {display} differs from eager reference on sample {index}: "
                            f"{value!r} != {expected!r}"
                        )
                    continue
                candidate = value if is_tensor else _scalar_tensor(value)
                reference = expected if expected_is_tensor else _scalar_tensor(expected)
                metrics = _C.compare_tensors(
                    candidate,
                    reference.to(candidate.device),
                    tolerance.atol,
                    tolerance.rtol,
                    fp64,
                    tolerance.max_rel_l2,
                )
                if noise_check and is_tensor and leaf.precise is not None and candidate.shape == leaf.precise.shape:
                    metrics.update(_noise_metrics(candidate, leaf, tolerance))
                core = {k: metrics[k] for k in _CORE_METRIC_KEYS if k in metrics}
                record = {
                    "sample": index,
                    "path": display,
                    **metrics,
                    "decided_by": _C.deciding_bound(core, native_tol),
                }
                summary.leaves.append(record)
                used = _bound_use(core, tolerance)
                if used > worst_use:
                    worst_use = used
                    summary.worst = record
                if not _C.leaf_passes(core, native_tol):
                    summary.passed = False
                    summary.worst = record
                    logger.info("%s", summary.log_line())
                    raise CorrectnessNumericError(
                        _C.numeric_failure_message(display, index, core, native_tol, precision_class)
                    )
    logger.info("%s", summary.log_line())
    return summary


def tf32_switches() -> dict[str, bool | str]:
    """torch's TF32 switches now: what an fp32 model on CUDA was computed with."""
    return {
        "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def effective_precision_class(backend: Backend, module: torch.nn.Module, device: torch.device) -> str:
    """The candidate's numeric regime (docs/reference/validation.md#precision-classes): the backend's own class,
    else the class eager computes the model in (half weights, or TF32 for an fp32 model on CUDA
    when torch allows TF32)."""
    cls = backend.precision_class
    if cls != "fp32":
        return cls
    return native_precision_class(module, device)
