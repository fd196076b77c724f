"""JIT inspection (docs/reference/jit.md "Inspection"): per patched module, call counts, wall time (CUDA
synchronised when the module lives on a GPU) and the types of arguments and outputs, written
as a self-contained HTML page by `save_report`, or at exit if it was never called."""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from pathlib import Path
from typing import Callable, Protocol, Sequence

import torch

from aitune.torch.jit.state import JITModuleState, runtime
from aitune.torch.tune_data.jit_inspect_html import render_inspection_html

logger = logging.getLogger("aitune")


@dataclasses.dataclass
class CallStats:
    calls: int = 0
    total_time_s: float = 0.0
    arg_types: dict[str, int] = dataclasses.field(default_factory=dict)
    output_types: dict[str, int] = dataclasses.field(default_factory=dict)


class Inspected(Protocol):
    """What inspection reads of a patched module (jit/patched_module.py's PatchedModule, which
    imports this module, so it is named by its shape here)."""

    name: str
    module: torch.nn.Module
    original_forward: Callable[..., object]
    level: int
    state: JITModuleState
    stats: CallStats | None

    @property
    def children(self) -> Sequence[Inspected]: ...

    @property
    def device(self) -> torch.device: ...


class _Reports:
    saved = False


_reports = _Reports()


def describe_value(value: object) -> str:
    """A short type description: tensors with dtype, rank and device; containers one level deep."""
    if isinstance(value, torch.Tensor):
        return f"Tensor[{str(value.dtype).removeprefix('torch.')}, {value.dim()}d, {value.device.type}]"
    if isinstance(value, (list, tuple)):
        inner = sorted({describe_value(v) for v in value[:8]})
        return f"{type(value).__name__}[{', '.join(inner)}]"
    if isinstance(value, dict):
        inner = sorted({describe_value(v) for v in list(value.values())[:8]})
        return f"dict[{', '.join(inner)}]"
    return type(value).__name__


def _sync(device: torch.device) -> None:
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize(device)


def timed_call(patched: Inspected, args: tuple, kwargs: dict) -> object:
    stats = patched.stats
    if stats is None:
        stats = patched.stats = CallStats()
    device = patched.device
    _sync(device)
    start = time.perf_counter()
    output = patched.original_forward(*args, **kwargs)
    _sync(device)
    stats.total_time_s += time.perf_counter() - start
    stats.calls += 1
    for value in list(args) + list(kwargs.values()):
        key = describe_value(value)
        stats.arg_types[key] = stats.arg_types.get(key, 0) + 1
    key = describe_value(output)
    stats.output_types[key] = stats.output_types.get(key, 0) + 1
    return output


def inspection_rows() -> list[dict[str, object]]:
    """One row per patched module in hierarchy order (a head, then its subtree)."""
    rows: list[dict[str, object]] = []

    def walk(node: Inspected, head_time: float) -> None:
        stats = node.stats or CallStats()
        rows.append(
            {
                "name": node.name,
                "class": type(node.module).__name__,
                "level": node.level,
                "state": "INSPECTED" if node.state.name == "RECORDING" else node.state.name,
                "calls": stats.calls,
                "total_time_s": stats.total_time_s,
                "avg_time_s": stats.total_time_s / stats.calls if stats.calls else 0.0,
                "share_of_head": stats.total_time_s / head_time if head_time else 0.0,
                "parameters": sum(p.numel() for p in node.module.parameters()),
                "arg_types": dict(stats.arg_types),
                "output_types": dict(stats.output_types),
            }
        )
        for child in node.children:
            walk(child, head_time)

    for head in runtime.heads:
        walk(head, head.stats.total_time_s if head.stats else 0.0)
    return rows


def model_names() -> str:
    """The class names of the inspected heads (the models), e.g. "ResNet" or "UNet, VAE"."""
    names = list(dict.fromkeys(type(head.module).__name__ for head in runtime.heads))
    return ", ".join(names) or "model"


def save_report(path: str | Path, model_name: str | None = None) -> Path:
    """Writes the inspection report (self-contained HTML) and returns its path. `model_name`
    defaults to the class names of the inspected top-level modules."""
    model_name = model_name or model_names()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_inspection_html(inspection_rows(), model_name), encoding="utf-8")
    _reports.saved = True
    logger.info("📄 JIT inspection report written to %s", path)
    return path


def save_report_at_exit() -> Path | None:
    """`jit_inspect_<timestamp>.html` in the working directory, unless save_report() was called."""
    if _reports.saved:
        return None
    stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S")
    return save_report(Path.cwd() / f"jit_inspect_{stamp}.html")
