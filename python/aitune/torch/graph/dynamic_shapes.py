"""User-declared dynamic dimensions (docs/reference/recording.md#explicit-dynamic-shapes). Validation lives in the C++
core so the messages are the same wherever a definition is checked."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Union

from aitune._native import _C
from aitune.exceptions import AITuneUserInputError, InvalidValueError
from aitune.utils.json_types import JSON, JSONDict


@dataclasses.dataclass(frozen=True)
class DynamicDim:
    """An axis whose size varies between `min` and `max` (inclusive); `opt` is the size to
    optimise for and defaults to `max`. Axes sharing a name must have one size per call."""

    name: str
    min: int
    max: int
    opt: int | None = None

    def __post_init__(self) -> None:
        try:
            _C.validate_dim_def(_dim_tuple(self))
        except AITuneUserInputError as e:  # AITune raises ValueError here: InvalidValueError is both
            raise InvalidValueError(str(e)) from None

    def to_dict(self) -> JSONDict:
        """AITune's serialisable form: {"type": "BatchDim" | "DynamicDim", "name", "min", "max", "opt"}."""
        return {"type": type(self).__name__, **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True)
class BatchDim(DynamicDim):
    """The batch axis, declared explicitly."""


ShapeDefinition = tuple[Union[int, DynamicDim], ...]
# An input named in a definition: a parameter name, or a tuple of keys and indices into it.
InputPath = Union[str, tuple]


def _dim_tuple(dim: DynamicDim) -> tuple:
    def _int(value: object, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _user_error(f"Dynamic dimension {dim.name!r} field {field} must be an int, got {value!r}.")
        return value

    if not isinstance(dim.name, str):
        raise _user_error(f"Dynamic dimension name must be a non-empty string, got {dim.name!r}.")
    opt = None if dim.opt is None else _int(dim.opt, "opt")
    return (dim.name, isinstance(dim, BatchDim), _int(dim.min, "min"), _int(dim.max, "max"), opt)


def _user_error(message: str) -> Exception:
    return InvalidValueError(message)


def to_native(dynamic_shapes: Mapping[InputPath, ShapeDefinition]) -> list[tuple[str, list]]:
    """[(path_repr, axes)] in the form aitune._C expects; validates the whole set."""
    defs = []
    for path, shape in dynamic_shapes.items():
        if not isinstance(shape, (tuple, list)):
            raise _user_error(
                f"Dynamic shape for input {path!r} must be a tuple of ints and DynamicDim/BatchDim, got {shape!r}."
            )
        axes: list = []
        for axis in shape:
            if isinstance(axis, DynamicDim):
                axes.append(_dim_tuple(axis))
            elif isinstance(axis, int) and not isinstance(axis, bool):
                axes.append(axis)
            else:
                raise _user_error(
                    f"Dynamic shape for input {path!r} has an axis {axis!r}; expected an int or a DynamicDim/BatchDim."
                )
        defs.append((repr(path), axes))
    _C.validate_shape_defs(defs)
    return defs


def to_json(dynamic_shapes: Mapping[InputPath, ShapeDefinition] | None) -> JSON:
    """JSON form for logs and checkpoints."""
    if dynamic_shapes is None:
        return None
    out = []
    for path, shape in dynamic_shapes.items():
        axes = [
            {"kind": "batch" if isinstance(a, BatchDim) else "dim", **dataclasses.asdict(a)}
            if isinstance(a, DynamicDim)
            else a
            for a in shape
        ]
        out.append({"path": list(path) if isinstance(path, tuple) else path, "shape": axes})
    return out


def from_json(data: JSON) -> dict[InputPath, ShapeDefinition] | None:
    """The mapping `to_json` wrote (a checkpoint's `dynamic_shapes`), checked as a user's definition
    is. A file is hostile: anything malformed raises a plain ValueError naming the entry (the
    loader reports the checkpoint as corrupt), never a KeyError or a user-input error."""
    try:
        return _from_json(data)
    except AITuneUserInputError as e:  # the definition checks' own errors: here a damaged file
        raise ValueError(f"dynamic_shapes: {e}") from None


def _from_json(data: JSON) -> dict[InputPath, ShapeDefinition] | None:
    if data is None:
        return None
    if not isinstance(data, list):
        raise ValueError(
            f"dynamic_shapes: expected a list of {{path, shape}} entries or null, got {type(data).__name__}"
        )
    out: dict[InputPath, ShapeDefinition] = {}
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or set(entry) != {"path", "shape"} or not isinstance(entry["shape"], list):
            raise ValueError(f"dynamic_shapes[{i}]: expected {{'path': ..., 'shape': [...]}}, got {entry!r:.200}")
        path = entry["path"]
        if isinstance(path, list) and all(isinstance(p, (str, int)) and not isinstance(p, bool) for p in path):
            path = tuple(path)
        elif not isinstance(path, str):
            raise ValueError(
                f"dynamic_shapes[{i}].path: expected a name or a list of names and indices, got {path!r:.200}"
            )
        out[path] = tuple(_axis_from_json(axis, f"dynamic_shapes[{i}].shape") for axis in entry["shape"])
    to_native(out)  # the C++ core's checks (axis ranges, shared names), as for a user's definition
    return out


def _axis_from_json(axis: JSON, where: str) -> int | DynamicDim:
    if isinstance(axis, int) and not isinstance(axis, bool):
        return axis
    fields = {"kind", "name", "min", "max", "opt"}
    if not isinstance(axis, dict) or set(axis) != fields or axis["kind"] not in ("batch", "dim"):
        raise ValueError(f"{where}: expected an int or {{kind: batch|dim, name, min, max, opt}}, got {axis!r:.200}")
    cls = BatchDim if axis["kind"] == "batch" else DynamicDim
    return cls(axis["name"], axis["min"], axis["max"], axis["opt"])
