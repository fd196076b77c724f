"""Numeric comparison of a candidate's outputs with eager's (docs/reference/validation.md). Metrics are
computed by the native comparator on the candidate's device; the pass rule and the message
come from the C++ core."""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from typing import Any

import torch

from aitune._native import _C
from aitune.exceptions import CorrectnessNumericError
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.graph.locator import access_path, semantic_path
from aitune.torch.utils.tensors import map_nested_tensors
from aitune.torch.validation import NumericTolerance

logger = logging.getLogger("aitune")


def reference_outputs(forward: Any, data: list[Sample], raw: list[Any] | None = None) -> list[Any]:
    """Eager outputs of every stored sample, computed once per graph before any candidate,
    without autocast, kept in host memory. `raw` receives the outputs themselves (host copies)
    for checkpoints (`aitune run --check` compares against them)."""
    refs = []
    with torch.no_grad():
        for sample in data:
            args, kwargs = copy.deepcopy((sample.args, sample.kwargs))
            output = forward(*args, **kwargs)
            if raw is not None:
                raw.append(map_nested_tensors(output, lambda t: t.detach().to("cpu", copy=True)))
            _, leaves = _C.flatten_value(output)
            refs.append(
                {(semantic_path(s) if s else ()): (_to_host(v), access_path(s, "output"), t) for s, v, t, _ in leaves}
            )
    return refs


def _to_host(value: Any) -> Any:
    return value.detach().to("cpu", copy=True) if isinstance(value, torch.Tensor) else copy.deepcopy(value)


_CORE_METRIC_KEYS = ("max_abs_error", "max_rel_error", "rel_l2_error", "mismatch_fraction", "has_nan", "numel")


@dataclasses.dataclass
class NumericSummary:
    precision_class: str
    tolerance: NumericTolerance
    passed: bool = True
    worst: dict[str, Any] = dataclasses.field(default_factory=dict)
    leaves: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def log_line(self) -> str:
        w = self.worst or {"max_abs_error": 0.0, "max_rel_error": 0.0, "rel_l2_error": 0.0, "mismatch_fraction": 0.0}
        t = self.tolerance
        bound = {
            "max_rel_l2": f"rel_l2 ≤ {t.max_rel_l2:g}",
            "max_mismatch_fraction": f"mismatched ≤ {100 * t.max_mismatch_fraction:g}%",
            "nan": "no NaN",
        }.get(w.get("decided_by", ""), "")
        return (
            f"🔍 numeric check ({self.precision_class}): max_abs={w['max_abs_error']:.3g}, "
            f"max_rel={w['max_rel_error']:.3g}, rel_l2={w['rel_l2_error']:.3g}, "
            f"mismatched={100 * w['mismatch_fraction']:.3f}% {'✅' if self.passed else '❌'}"
            + (f" (decided by {bound})" if bound else "")
        )

    def describe(self) -> str:
        """The log line: the worst leaf's metrics, the verdict and the bound that decided it."""
        return self.log_line()


def _bound_use(core: dict[str, Any], tolerance: NumericTolerance) -> float:
    """The largest share of a bound the leaf uses (NaN: infinite), to pick the worst leaf."""
    if core["has_nan"] or math.isnan(core["rel_l2_error"]) or math.isnan(core["mismatch_fraction"]):
        return math.inf

    def share(metric: float, bound: float) -> float:
        if bound > 0:
            return metric / bound
        return math.inf if metric > 0 else 0.0

    return max(
        share(core["rel_l2_error"], tolerance.max_rel_l2),
        share(core["mismatch_fraction"], tolerance.max_mismatch_fraction),
    )


def _scalar_tensor(value: Any) -> torch.Tensor:
    return torch.tensor(float(value), dtype=torch.float64)


def check_numeric(
    infer: Any, graph: GraphSpec, data: list[Sample], refs: list[Any], tolerance: NumericTolerance, precision_class: str
) -> NumericSummary:
    summary = NumericSummary(precision_class, tolerance)
    native_tol = tolerance.to_native()
    fp64 = precision_class == "fp32"
    worst_use = -1.0  # the worst leaf uses the largest share of a bound
    with torch.no_grad():
        for index, (sample, ref) in enumerate(zip(data, refs)):
            args, kwargs = copy.deepcopy((sample.args, sample.kwargs))
            output = infer(*args, **kwargs)
            _, leaves = _C.flatten_value(output)
            for steps, value, is_tensor, _ in leaves:
                path = semantic_path(steps) if steps else ()
                if path not in ref:
                    continue  # structure problems are reported by the structural check
                expected, display, expected_is_tensor = ref[path]
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
                    candidate, reference.to(candidate.device), tolerance.atol, tolerance.rtol, fp64
                )
                core = {k: metrics[k] for k in _CORE_METRIC_KEYS}
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


def tf32_switches() -> dict[str, Any]:
    """torch's TF32 switches now: what an fp32 model on CUDA was computed with."""
    return {
        "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def effective_precision_class(backend: Any, module: torch.nn.Module, device: torch.device) -> str:
    """The candidate's numeric regime (docs/reference/validation.md#numeric-comparison table): the backend's own class,
    half weights, or TF32 for an fp32 model on CUDA when torch (or the backend) allows TF32."""
    cls = backend.precision_class
    if cls != "fp32":
        return cls
    dtypes = {p.dtype for p in module.parameters()}
    if torch.float16 in dtypes:
        return "fp16"
    if torch.bfloat16 in dtypes:
        return "bf16"
    if device.type == "cuda":
        tf32 = (
            torch.backends.cuda.matmul.allow_tf32
            or torch.backends.cudnn.allow_tf32
            or torch.get_float32_matmul_precision() != "highest"
        )
        if tf32:
            return "tf32"
    return "fp32"
