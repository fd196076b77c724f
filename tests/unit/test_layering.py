"""The Python package is layered (docs/design.md#layers): a module imports only from its own layer
or the layers below it, the imports between modules form no cycle — counting every edge: top level,
inside functions and under `if TYPE_CHECKING:`, with no allow-list — and an `aitune` import inside a
function is the exception, listed below with the reason it has to wait until the call.

The imports are read from the source with `ast`, so the test needs neither torch nor the native
extension. Importing a
submodule also runs its package's `__init__`; that implicit edge is not counted (the rules are
about what a file names), which is why a package's `__init__` should re-export only from its own
layer or below."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

# The repository's python/ folder, wherever under tests/ this file lives.
PACKAGE_ROOT = next(p / "python" for p in Path(__file__).resolve().parents if (p / "python" / "aitune").is_dir())

# Lowest first. A module belongs to the layer of the longest entry that is its name or a package
# above it; every module must belong to one. The table is docs/design.md#layers.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "aitune",
            "aitune.__version__",
            "aitune._native",
            "aitune.exceptions",
            "aitune.global_context",
            "aitune.utils",
            "aitune.tensorrt_install",
            "aitune.torch.config",
            "aitune.torch.utils",
            "aitune.torch.logging_utils",
            "aitune.torch.global_context",
            "aitune.torch.module_registry",
            "aitune.torch.validation",
            "aitune.torch.shape_datasets",
            "aitune.torch.dataloader",
        ),
    ),
    # The graph data model: what a recorded call is.
    (
        "graph",
        (
            "aitune.torch.graph",
            "aitune.torch.graph.dynamic_shapes",
            "aitune.torch.graph.graph_spec",
            "aitune.torch.graph.locator",
            "aitune.torch.graph.tree",
            "aitune.torch.graph.signature",
            "aitune.torch.graph.recording",
        ),
    ),
    # What a backend writes and reads in a checkpoint folder, and the environment fingerprint.
    ("checkpoint parts", ("aitune.torch.checkpoint",)),
    ("telemetry", ("aitune.torch.tune_data",)),
    ("backend", ("aitune.torch.backend",)),
    ("task", ("aitune.torch.task",)),
    # multi_device runs a strategy's candidates on other devices, with the strategy's own steps.
    ("tune_strategy", ("aitune.torch.tune_strategy", "aitune.torch.multi_device")),
    (
        "results",
        (
            "aitune.torch.results",
            "aitune.torch.checkpoint.format",
            "aitune.torch.checkpoint.entry_writer",
            "aitune.torch.checkpoint.restore",
        ),
    ),
    ("module", ("aitune.torch.module",)),
    (
        "api",
        (
            "aitune.torch",
            "aitune.torch.tuning",
            "aitune.torch.checkpoint.save",
            "aitune.torch.checkpoint.load",
            "aitune.torch.jit",
            "aitune.torch.inspecting",
            "aitune.torch.performance",
            "aitune.torch.backend.kernels",
            "aitune.torch.libs",
            "aitune.torch.examples",
            "aitune.dynamo",
            "aitune.__main__",
            "aitune.jit_bootstrap",
        ),
    ),
]

# (importer, imported) -> why the import must wait until a function runs. "*" as the imported
# module: every aitune import of that file.
DEFERRED: dict[tuple[str, str], str] = {
    ("aitune.__main__", "*"): "`python -m aitune` parses its arguments (and answers --help) before torch and _C load",
    (
        "aitune.jit_bootstrap",
        "aitune.torch.jit.enable",
    ): "the autowrapt entry point: importing `enable` patches nn.Module, which only the hook may decide",
    ("aitune.dynamo.launch", "*"): "`serve` supervises worker processes without torch; only a worker loads the model",
    (
        "aitune.torch.multi_device.worker",
        "*",
    ): "the entry point of a spawned worker process: it sets its environment before torch and aitune load",
    (
        "aitune.torch.tuning",
        "aitune.torch.multi_device.pool",
    ): "starts the device pool (worker processes) only when tuning on several devices",
}

# (importer, imported) -> why a lower layer may import a higher one.
UPWARD: dict[tuple[str, str], str] = {}


@dataclasses.dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int
    deferred: bool  # inside a function
    type_only: bool  # under `if TYPE_CHECKING:`

    def where(self) -> str:
        return f"{self.importer}:{self.line} -> {self.imported}"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((PACKAGE_ROOT / "aitune").rglob("*.py")):
        parts = path.relative_to(PACKAGE_ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    return name if name in modules else None


def _edges(modules: dict[str, Path]) -> list[Edge]:
    edges = []
    for importer, path in modules.items():
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]

        def visit(node: ast.AST, deferred: bool, type_only: bool) -> None:
            for child in ast.iter_child_nodes(node):
                child_deferred = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                child_type_only = type_only or (
                    isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
                )
                targets: list[str | None] = []
                if isinstance(child, ast.ImportFrom):
                    base = child.module or ""
                    if child.level:  # relative: resolve against this module's package
                        anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                        base = ".".join(anchor + ([base] if base else []))
                    if base == "aitune" or base.startswith("aitune."):
                        # `from pkg import submodule` names the submodule; otherwise the module itself
                        targets = [
                            _resolve(f"{base}.{a.name}", modules) or _resolve(base, modules) for a in child.names
                        ]
                elif isinstance(child, ast.Import):
                    targets = [_resolve(a.name, modules) for a in child.names if a.name.split(".")[0] == "aitune"]
                for target in dict.fromkeys(targets):
                    assert target is not None, f"{importer}:{child.lineno}: imports an aitune module that is not there"
                    if target != importer:
                        edges.append(Edge(importer, target, child.lineno, deferred, type_only))
                visit(child, child_deferred, child_type_only)

        visit(ast.parse(path.read_text(encoding="utf-8")), False, False)
    return edges


def _layer(module: str) -> int:
    best, best_len = None, -1
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            inside = module == entry or (entry.count(".") >= 1 and module.startswith(entry + "."))
            if inside and len(entry) > best_len:
                best, best_len = index, len(entry)
    assert best is not None, f"{module} is in no layer: add it to LAYERS (and to docs/design.md#layers)"
    return best


def _deferred_reason(edge: Edge) -> str | None:
    return DEFERRED.get((edge.importer, edge.imported)) or DEFERRED.get((edge.importer, "*"))


def _cycles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, set()).add(e.imported)
        graph.setdefault(e.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return _edges(_modules())


def test_every_module_has_a_layer():
    for module in _modules():
        _layer(module)


def test_no_import_cycle(edges):
    """Every edge counts, type-only ones too: a cycle closed by an annotation is still two modules
    that cannot be understood apart (declare a Protocol in the lower one instead)."""
    cycles = _cycles(edges)
    assert not cycles, "import cycles (each line one cycle; cut one edge, see docs/design.md#layers):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_no_upward_import(edges):
    upward = [
        e.where() + f" ({LAYERS[_layer(e.importer)][0]} imports {LAYERS[_layer(e.imported)][0]})"
        for e in edges
        if _layer(e.imported) > _layer(e.importer) and (e.importer, e.imported) not in UPWARD
    ]
    assert not upward, "imports from a higher layer (docs/design.md#layers):\n" + "\n".join(upward)


def test_function_level_imports_are_listed(edges):
    unlisted = [e.where() for e in edges if e.deferred and not e.type_only and _deferred_reason(e) is None]
    assert not unlisted, (
        "aitune imports inside a function: move them to the top level, or under TYPE_CHECKING "
        "for annotations, or list them in DEFERRED with the reason:\n" + "\n".join(unlisted)
    )


def test_allow_lists_have_no_stale_entries(edges):
    """An entry whose import is gone must go too, so the lists only ever shrink."""
    deferred = {(e.importer, e.imported) for e in edges if e.deferred and not e.type_only}
    importers = {importer for importer, _ in deferred}
    stale = [
        f"DEFERRED {key}"
        for key in DEFERRED
        if (key[1] == "*" and key[0] not in importers) or (key[1] != "*" and key not in deferred)
    ]
    present = {(e.importer, e.imported) for e in edges if not e.type_only}
    stale += [f"UPWARD {key}" for key in UPWARD if key not in present]
    assert not stale, "allow-list entries with no matching import (remove them):\n" + "\n".join(stale)


def test_the_checker_sees_what_it_must_refuse(tmp_path):
    """The rules fire on a small package with a cycle, an upward import and an unlisted
    function-level import."""
    pkg = tmp_path / "aitune"
    (pkg / "torch").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "torch" / "__init__.py").write_text("")
    (pkg / "torch" / "config.py").write_text("from aitune.torch import tuning\n")  # base -> api: upward
    (pkg / "torch" / "tuning.py").write_text("def f():\n    from aitune.torch import config\n")  # deferred
    modules = {
        "aitune": pkg / "__init__.py",
        "aitune.torch": pkg / "torch" / "__init__.py",
        "aitune.torch.config": pkg / "torch" / "config.py",
        "aitune.torch.tuning": pkg / "torch" / "tuning.py",
    }
    found = _edges(modules)
    assert {(e.importer, e.imported, e.deferred) for e in found} == {
        ("aitune.torch.config", "aitune.torch.tuning", False),
        ("aitune.torch.tuning", "aitune.torch.config", True),
    }
    assert _cycles(found) == [["aitune.torch.config", "aitune.torch.tuning"]]
    assert [e.importer for e in found if _layer(e.imported) > _layer(e.importer)] == ["aitune.torch.config"]
    assert [e.importer for e in found if e.deferred and _deferred_reason(e) is None] == ["aitune.torch.tuning"]


def test_a_cycle_closed_by_an_annotation_counts(tmp_path):
    """A type-only edge closes a cycle as well as a runtime one."""
    pkg = tmp_path / "aitune"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from aitune import high\n")
    (pkg / "high.py").write_text("from aitune import low\n")
    modules = {"aitune": pkg / "__init__.py", "aitune.low": pkg / "low.py", "aitune.high": pkg / "high.py"}
    found = _edges(modules)
    assert {(e.importer, e.type_only) for e in found} == {("aitune.low", True), ("aitune.high", False)}
    assert _cycles(found) == [["aitune.high", "aitune.low"]]
