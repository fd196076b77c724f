"""AITune's `TensorSpec` and `InfoLevel` (docs/guide.md, "Coming from AITune"): one tensor's shape
lattice — current symbolic shape (`batch0`, `dim0` for axes that scaled with the batch size or
changed otherwise), min and max shapes, dtype — over aitune's native lattice (aitune._C.TensorSpec,
the one the recorder builds graphs with)."""

from __future__ import annotations

import enum

import torch

from aitune._native import _C


class InfoLevel(enum.Enum):
    """How much `describe()` says: access paths only, a plain table with shapes, or everything."""

    SHORT = enum.auto()
    MEDIUM = enum.auto()
    FULL = enum.auto()


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class TensorSpec:
    """Build with `TensorSpec.from_tensor(tensor, batch_size)`; widen with `update_shapes_seen`."""

    def __init__(self, native: _C.TensorSpec, dtype: torch.dtype, samples: list[tuple[list[int], int | None]]) -> None:
        self._native = native
        self.dtype = dtype
        self._samples = samples  # (shape, batch size) of every sample seen, for merging

    @staticmethod
    def from_tensor(tensor: torch.Tensor, batch_size: int | float | None = None) -> TensorSpec:
        size = int(batch_size) if isinstance(batch_size, (int, float)) and batch_size == batch_size else None
        shape = list(tensor.shape)
        return TensorSpec(
            _C.TensorSpec.from_sample(shape, _dtype_name(tensor.dtype), size), tensor.dtype, [(shape, size)]
        )

    @property
    def shape(self) -> list[int | str]:
        return list(self._native.shape)

    @property
    def min_shape(self) -> list[int]:
        return list(self._native.min_shape)

    @property
    def max_shape(self) -> list[int]:
        return list(self._native.max_shape)

    def update_shapes_seen(self, other: TensorSpec) -> None:
        """Widens this lattice with every sample `other` has seen."""
        if len(other.min_shape) != len(self.min_shape):
            raise ValueError(
                f"TensorSpec.update_shapes_seen: the other tensor has rank {len(other.min_shape)}; "
                f"expected rank {len(self.min_shape)} (shape {self.shape})"
            )
        for shape, batch_size in other._samples:
            self._native.update(shape, batch_size)
        self._samples = self._samples + other._samples

    def has_batch_axis(self) -> bool:
        return bool(self._native.has_batch_axis())

    def has_dynamic_axis(self) -> bool:
        """An axis that changed between samples but not with the batch size (a `dim` axis)."""
        return "dim" in self._native.axis_kinds

    def get_batch_axis_multipliers(self) -> dict[int, int]:
        return dict(self._native.batch_multipliers)

    def get_max_batch_size(self) -> int:
        return int(self._native.max_batch_size())

    def get_min_batch_size(self) -> int | None:
        return self._native.min_batch_size() if self.has_batch_axis() else None

    def matches(self, other: TensorSpec) -> bool:
        """Same rank, and every axis that both fix has the same size."""
        if len(self.shape) != len(other.shape):
            return False
        return all(not (isinstance(a, int) and isinstance(b, int)) or a == b for a, b in zip(self.shape, other.shape))

    def batched_shape(self, shape: list[int], batch_size: int) -> list[int]:
        """`shape` (of a tensor this spec describes) with its batch axes scaled to `batch_size`."""
        return list(self._native.batched_shape(list(shape), batch_size))

    def describe(self, info_level: InfoLevel = InfoLevel.FULL) -> str:
        if info_level is InfoLevel.FULL:
            return f"shape={self.shape} min={self.min_shape} max={self.max_shape} dtype={self.dtype}"
        return f"shape={self.shape}"

    def to_dict(self) -> dict[str, object]:
        return {"shape": self.shape, "min_shape": self.min_shape, "max_shape": self.max_shape, "dtype": str(self.dtype)}

    def __repr__(self) -> str:
        return f"TensorSpec({self.describe()})"
