"""torch's float32 precision switches, changed for a while and put back exactly.

torch has two ways to say whether float32 arithmetic may use TF32: the legacy switches
(`torch.set_float32_matmul_precision`, `torch.backends.cuda.matmul.allow_tf32`,
`torch.backends.cudnn.allow_tf32`) and, since torch 2.9, one `fp32_precision` per backend
("ieee", "tf32", or "none": inherit). The legacy setters write the new switches: after
`torch.set_float32_matmul_precision("highest")` matmul's "none" reads "ieee", so putting back the
legacy value does not put back the state. That matters beyond tidiness: Inductor's FX-graph cache
key includes `torch.backends.cuda.matmul.fp32_precision`, so a process that had computed aitune's
float32 reference once compiled under another key than one that had not, and every JIT rebuild of
a reused tuning result missed torch's cache (docs/reference/configuration.md#compiler-caches).

A user who set conv and RNN apart through the new API cannot even read
`torch.backends.cudnn.allow_tf32` (torch raises), so where the new switches exist they are what is
read, set and put back."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, Iterator, TypeVar

import torch

T = TypeVar("T")

# The new API's switches that decide float32 matmul and convolution precision on CUDA.
_LEAVES = (("cuda", "matmul"), ("cudnn", "conv"), ("cudnn", "rnn"))


def _leaf(path: tuple[str, ...]) -> object | None:
    obj: object | None = torch.backends
    for part in path:
        obj = getattr(obj, part, None)
    return obj if obj is not None and hasattr(obj, "fp32_precision") else None


def _new_api() -> dict[tuple[str, ...], object]:
    """The new API's switch objects by path; empty on a torch without them."""
    leaves = {path: _leaf(path) for path in _LEAVES}
    return {path: leaf for path, leaf in leaves.items() if leaf is not None}


@dataclasses.dataclass(frozen=True)
class PrecisionSwitches:
    """What `snapshot()` read. torch keeps the legacy switches (matmul precision, cuDNN's
    allow_tf32) as states of their own beside the new ones: setting a new switch leaves them alone,
    and the two disagreeing make torch refuse later legacy reads as "a mix of the legacy and new
    APIs". So both are kept; None where torch refused the read."""

    matmul_precision: str | None  # torch.get_float32_matmul_precision()
    cudnn_allow_tf32: bool | None  # torch.backends.cudnn.allow_tf32
    new_api: dict[tuple[str, ...], str]  # empty on a torch without per-backend fp32_precision


def _read(read: Callable[[], T]) -> T | None:
    try:
        return read()
    except RuntimeError:  # a mixed state torch will not read back through the legacy API
        return None


def snapshot() -> PrecisionSwitches:
    return PrecisionSwitches(
        _read(torch.get_float32_matmul_precision),
        _read(lambda: bool(torch.backends.cudnn.allow_tf32)),
        {path: str(leaf.fp32_precision) for path, leaf in _new_api().items()},
    )


def restore(saved: PrecisionSwitches) -> None:
    """The legacy switches first (their setters write the new ones), then the new switches."""
    if saved.matmul_precision is not None:
        torch.set_float32_matmul_precision(saved.matmul_precision)
    if saved.cudnn_allow_tf32 is not None:
        torch.backends.cudnn.allow_tf32 = saved.cudnn_allow_tf32
    leaves = _new_api()
    for path, value in saved.new_api.items():
        leaves[path].fp32_precision = value


@contextlib.contextmanager
def preserved() -> Iterator[None]:
    """Whatever the body changes in the float32 precision switches is undone after it."""
    saved = snapshot()
    try:
        yield
    finally:
        restore(saved)


@contextlib.contextmanager
def ieee_fp32() -> Iterator[None]:
    """float32 arithmetic without TF32 (matmul and cuDNN) for the duration, then exactly the
    switches found before."""
    with preserved():
        # Legacy first, so the legacy and new states agree (see PrecisionSwitches), then the new.
        torch.set_float32_matmul_precision("highest")
        torch.backends.cudnn.allow_tf32 = False
        for leaf in _new_api().values():
            leaf.fp32_precision = "ieee"
        yield


def _resolves_to_tf32(path: tuple[str, ...], value: str) -> bool:
    """A new-API value after inheritance: "none" takes the parent's (cudnn's, then the global)."""
    if value != "none":
        return value == "tf32"
    parent = torch.backends.cudnn if path[0] == "cudnn" else None
    for holder in (parent, torch.backends):
        inherited = getattr(holder, "fp32_precision", "none") if holder is not None else "none"
        if inherited != "none":
            return inherited == "tf32"
    return False


def tf32_allowed() -> bool:
    """torch lets some float32 arithmetic on CUDA (matmul or convolution) use TF32."""
    try:
        return bool(
            torch.backends.cuda.matmul.allow_tf32
            or torch.backends.cudnn.allow_tf32
            or torch.get_float32_matmul_precision() != "highest"
        )
    except RuntimeError:  # the new API set conv and RNN apart: the legacy reads refuse
        return any(_resolves_to_tf32(path, str(leaf.fp32_precision)) for path, leaf in _new_api().items())
