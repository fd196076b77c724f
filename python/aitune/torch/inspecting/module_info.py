"""Results of ``ait.inspect``: the topmost executed modules with their call statistics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from tabulate import tabulate

from aitune.exceptions import InvalidValueError

if TYPE_CHECKING:
    from aitune.torch.inspecting.module_inspector import Location

COLUMNS = [
    "Module Name",
    "Calls",
    "Total Time (s)",
    "Avg Time (s)",
    "% of Total",
    "# of params",
    "# of layers",
    "precisions",
]


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclass(eq=False)  # identity: get_modules() results are compared with `in` against the same objects
class ModuleInfo:
    """One executed module found by ``ait.inspect``: a handle for ``ait.wrap`` plus its
    statistics, with AITune's field names (docs/guide.md, "Coming from AITune").

    ``total_execution_time`` is seconds over the measured iterations, ``execution_count`` the
    calls; ``execution_ratio`` is this module's share (0..1) of the total time of all reported
    modules. ``input_types`` / ``output_types`` hold one entry per measured call, e.g.
    ``{"args": ["Tensor"], "kwargs": {}}`` and ``{"type": "Tensor"}``.
    """

    module: torch.nn.Module = field(repr=False)
    name: str = ""
    parent: ModuleInfo | None = field(default=None, repr=False)  # the nearest inspected module above
    forward_called: bool = False
    execution_count: int = 0
    total_execution_time: float = 0.0
    input_types: list[dict[str, object]] = field(default_factory=list, repr=False)
    output_types: list[dict[str, object]] = field(default_factory=list, repr=False)
    object_path: str | None = None
    depth: int = 0
    execution_ratio: float = 0.0
    location: Location | None = field(default=None, repr=False)  # where inspect found it (for wrap)

    @property
    def module_type(self) -> type:
        return type(self.module)

    @property
    def average_execution_time(self) -> float:
        return self.total_execution_time / self.execution_count if self.execution_count else 0.0

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.module.parameters())

    @property
    def num_layers(self) -> int:
        """Direct children, as AITune counts them."""
        return len(list(self.module.named_children()))

    @property
    def precisions(self) -> set[torch.dtype]:
        """The parameter dtypes of the module's layers (AITune: a set of torch.dtype)."""
        return {next(m.parameters()).dtype for m in self.module.modules() if next(m.parameters(), None) is not None}

    # aitune's earlier names of the same statistics
    @property
    def calls(self) -> int:
        return self.execution_count

    @property
    def total_time(self) -> float:
        return self.total_execution_time

    @property
    def avg_time(self) -> float:
        return self.average_execution_time

    @property
    def num_params(self) -> int:
        return self.num_parameters

    @property
    def percentage(self) -> float:
        return self.execution_ratio * 100.0

    @property
    def precision_names(self) -> list[str]:
        return sorted(_dtype_name(d) for d in self.precisions)

    def row(self) -> list[object]:
        return [
            self.name,
            self.calls,
            f"{self.total_time:.6f}",
            f"{self.avg_time:.6f}",
            f"{self.percentage:.2f}",
            self.num_params,
            self.num_layers,
            ", ".join(self.precision_names),
        ]


InspectedModule = ModuleInfo  # aitune's earlier name


class InspectedModulesInfo:
    """The topmost executed modules found by ``ait.inspect``, in discovery order."""

    def __init__(self, modules: list[InspectedModule], number_of_iterations: int = 0) -> None:
        self.modules = list(modules)
        self.number_of_iterations = number_of_iterations
        total = sum(m.total_time for m in self.modules)
        for m in self.modules:
            m.execution_ratio = m.total_time / total if total > 0 else 0.0

    @property
    def total_time(self) -> float:
        return sum(m.total_time for m in self.modules)

    def __len__(self) -> int:
        return len(self.modules)

    def __iter__(self):
        return iter(self.modules)

    def __getitem__(self, name: str) -> InspectedModule:
        for m in self.modules:
            if m.name == name:
                return m
        raise KeyError(name)

    def table(self) -> str:
        rows = [m.row() for m in sorted(self.modules, key=lambda m: m.total_time, reverse=True)]
        return tabulate(rows, headers=COLUMNS, tablefmt="fancy_grid", disable_numparse=True)

    def describe(self) -> None:
        """Print the table of modules, slowest first."""
        print(self.table())

    def get_modules(self, min_execution_ratio: float | None = None, limit: int | None = None) -> list[InspectedModule]:
        """Modules sorted by total time, highest first; those with a share of at least
        ``min_execution_ratio`` (0..1), at most ``limit`` of them."""
        if min_execution_ratio is not None and not (0.0 <= float(min_execution_ratio) <= 1.0):
            raise InvalidValueError(f"min_execution_ratio value must be between 0 and 1, got {min_execution_ratio!r}.")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidValueError(f"limit must be None or an integer >= 0, got {limit!r}.")
        selected = sorted(self.modules, key=lambda m: m.total_time, reverse=True)
        if min_execution_ratio is not None:
            selected = [m for m in selected if m.execution_ratio >= min_execution_ratio]
        return selected[:limit] if limit is not None else selected

    def __repr__(self) -> str:
        return f"InspectedModulesInfo({[m.name for m in self.modules]})"
