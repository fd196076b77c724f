"""Numeric validation settings (docs/reference/validation.md#numeric-comparison): precision classes and their default
tolerances.

The table itself lives in the C++ core (cpp/core/select/tolerance.cc) so the C++ runtime's
`aitune run --check` and Python agree; this module exposes it as Python values."""

from __future__ import annotations

import dataclasses
import enum
from typing import Mapping, Union

from aitune._native import _C


class PrecisionClass(str, enum.Enum):
    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"
    FP8 = "fp8"


@dataclasses.dataclass(frozen=True)
class NumericTolerance:
    """A leaf passes when rel_l2_error <= max_rel_l2 and mismatch_fraction <=
    max_mismatch_fraction; an element mismatches when |c - r| > max(atol, max_rel_l2 * RMS(r)) +
    rtol * |r|. With max_noise_ratio > 0 (the defaults of tf32/fp16/bf16), a candidate computing
    the model's own precision must also stay within max_noise_ratio x eager's own error + noise_floor
    against a float32 reference computed without TF32 (docs/reference/validation.md#the-noise-bound)."""

    atol: float
    rtol: float
    max_rel_l2: float
    max_mismatch_fraction: float
    max_noise_ratio: float = 0.0
    noise_floor: float = 0.0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"NumericTolerance.{field.name} must be a non-negative number, got {value!r}")
        if self.max_mismatch_fraction > 1:
            raise ValueError(f"NumericTolerance.max_mismatch_fraction must be <= 1, got {self.max_mismatch_fraction}")

    def to_native(self) -> dict[str, float]:
        return dataclasses.asdict(self)


DEFAULT_TOLERANCES: dict[PrecisionClass, NumericTolerance] = {
    cls: NumericTolerance(**_C.default_tolerance(cls.value)) for cls in PrecisionClass
}

ToleranceSetting = Union[NumericTolerance, Mapping[Union[PrecisionClass, str], NumericTolerance]]


def resolve_tolerance(
    precision_class: str, backend_tolerance: NumericTolerance | None, strategy_tolerance: ToleranceSetting | None
) -> NumericTolerance:
    """Precedence (docs/reference/validation.md#numeric-comparison): the backend's tolerance=, then the strategy's
    set_tolerance(...) (one value or one per class), then the defaults."""
    cls = PrecisionClass(precision_class)
    if backend_tolerance is not None:
        return backend_tolerance
    if isinstance(strategy_tolerance, NumericTolerance):
        return strategy_tolerance
    if strategy_tolerance is not None:
        for key, value in strategy_tolerance.items():
            if PrecisionClass(key) is cls:
                return value
    return DEFAULT_TOLERANCES[cls]
