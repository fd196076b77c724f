"""The census of AITune 0.6's import paths: every module and name an AITune user can import,
read from AITune's public material (docs/guide.md, "Coming from AITune").

Usage:
    python tools/compat/aitune_census.py AITUNE_CHECKOUT            # print the rows
    python tools/compat/aitune_census.py AITUNE_CHECKOUT --write    # rewrite the generated block of
                                                                    # tests/compat/aitune_paths.py
    python tools/compat/aitune_census.py AITUNE_CHECKOUT --check    # exit 1 when that block is stale

AITUNE_CHECKOUT is a checkout of github.com/ai-dynamo/aitune. Nothing in it is imported or run:
its files are read as text and parsed with `ast`. A row is (module, name, origin, sources):

* `name` is "" for the module itself (`import aitune.torch.jit.enable`);
* `origin` is "module:name" where AITune defines the object (re-exports followed), so the
  test can demand that every path of one AITune object gives one aitune object;
* `sources` says where AITune's material shows the path.

The rows come from: the `import` statements in README.md, docs/, examples/ and notebooks/; the
dotted `aitune.…` names and `aitune/….py` files those pages cite; every package's `__all__`,
at the package and at the module each name comes from; and EXTRA_NAMES below (names AITune's
guides and tests import that its packages do not re-export).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

# Names at AITune paths that its packages do not re-export, but that its guides and its own tests
# import (issue 28 lists them): module -> names.
EXTRA_NAMES = {
    "aitune.torch.module.wrapper_module": ["Module", "ModuleState"],
    "aitune.torch.module.graph_spec": ["GraphSpec"],
    "aitune.torch.module.locator": ["Locator"],
    "aitune.torch.module.forward_signature": ["ForwardSignature"],
    "aitune.torch.module.tensor_spec": ["TensorSpec", "InfoLevel"],
    "aitune.torch.module.sample_metadata": ["SampleMetadata", "InfoLevel"],
    "aitune.torch.dynamic_shapes": ["BatchDim", "DynamicDim"],
    "aitune.torch.task.profiling.profiling": ["profile", "profile_backend", "ProfilingStatus", "ProfilingResults"],
    "aitune.torch.jit.patcher": ["Patcher", "patch_for_jit_tuning", "jit_reset"],
    "aitune.torch.jit.patched_module": ["PatchedModule", "PRINT_HIERARCHY_HEADER", "GraphBreakException"],
    "aitune.torch.tune_strategy.max_throughput_strategy": ["MaxThroughputStrategy", "MaxThroughputProfilingResult"],
    "aitune.torch.tune_strategy.min_latency_strategy": ["MinLatencyStrategy", "MinLatencyProfilingResult"],
    "aitune.torch.tune_strategy.latency_budget_strategy": ["LatencyBudgetStrategy", "LatencyBudgetProfilingResult"],
    "aitune.torch.tune_strategy.profiling_tune_strategy": ["BackendProfilingResult", "BackendPerfResult"],
    "aitune.torch.inspecting.module_info": ["ModuleInfo"],
    "aitune.torch.task.profiling.events": ["ProfilingResultEvent"],
    "aitune.torch.task.profiling.metrics": ["get_latency", "get_throughput", "is_throughput_saturated"],
    "aitune.torch.dataloader": [
        "InputConfig",
        "MinMaxRandomDataset",
        "SingleBatchDatasetWrapper",
        "ensure_enough_samples",
        "DatasetLike",
        "samples_generator",
        "default_data_collator",
    ],
    "aitune.torch.libs.torch_compile": ["TorchCompileMode"],
    "aitune.torch.tuning": ["tune", "save", "load"],
}

DOC_IMPORT = re.compile(r"^\s*from\s+(aitune(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n#]+)", re.M)
DOC_MODULE_IMPORT = re.compile(r"^\s*import\s+(aitune(?:\.\w+)*)", re.M)
DOTTED = re.compile(r"(?<![\w/.:])(aitune(?:\.[A-Za-z_]\w*)+)")
SOURCE_FILE = re.compile(r"(?<![\w/])(aitune(?:/\w+)+)\.py\b")


class AITuneTree:
    """AITune's package read statically: which modules exist and where each name is defined."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._trees: dict[str, ast.Module | None] = {}

    def path_of(self, module: str) -> Path | None:
        base = self.root.joinpath(*module.split("."))
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                return candidate
        return None

    def is_module(self, module: str) -> bool:
        return self.path_of(module) is not None

    def is_package(self, module: str) -> bool:
        path = self.path_of(module)
        return path is not None and path.name == "__init__.py"

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            path = self.path_of(module)
            self._trees[module] = ast.parse(path.read_text(encoding="utf-8")) if path else None
        return self._trees[module]

    def exports(self, module: str) -> list[str]:
        """The names of the module's `__all__` (empty without one)."""
        for node in (self.tree(module) or ast.Module(body=[])).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                return [elt.value for elt in getattr(node.value, "elts", []) if isinstance(elt, ast.Constant)]
        return []

    def imported_from(self, module: str, name: str) -> str | None:
        """The module `module` imports `name` from, or None when it defines it (or lacks it)."""
        for node in ast.walk(self.tree(module) or ast.Module(body=[])):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return f"{node.module}.{alias.name}" if alias.asname else node.module
        return None

    def _top_level(self, module: str) -> Iterator[ast.stmt]:
        """Module-level statements, also those inside top-level `if` and `try` blocks."""
        pending = list((self.tree(module) or ast.Module(body=[])).body)
        while pending:
            node = pending.pop(0)
            yield node
            if isinstance(node, (ast.If, ast.Try)):
                pending += node.body + node.orelse + getattr(node, "finalbody", [])
                pending += [s for handler in getattr(node, "handlers", []) for s in handler.body]

    def defines(self, module: str, name: str) -> bool:
        for node in self._top_level(module):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return True
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and any(getattr(t, "id", None) == name for t in targets):
                return True
        return False

    def origin(self, module: str, name: str) -> str | None:
        """`defining_module:name` following re-exports; None when AITune has no such name."""
        seen = set()
        while (module, name) not in seen:
            seen.add((module, name))
            if self.defines(module, name):
                return f"{module}:{name}"
            source = self.imported_from(module, name)
            if source is None:
                return f"{module}.{name}:" if self.is_module(f"{module}.{name}") else None
            if "." in source and not self.is_module(source) and self.is_module(source.rsplit(".", 1)[0]):
                source, name = source.rsplit(".", 1)  # `from m import x as y`
            if not self.is_module(source):
                return None
            module = source
        return None


def _public_pages(root: Path) -> Iterator[tuple[str, str]]:
    """(relative path, text) of AITune's README, docs, examples and notebooks (code cells)."""
    paths = [root / "README.md"]
    for folder, patterns in (("docs", ("*.md",)), ("examples", ("*.py", "*.md")), ("notebooks", ("*.ipynb",))):
        for pattern in patterns:
            paths += sorted((root / folder).rglob(pattern))
    for path in paths:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".ipynb":
            cells = json.loads(text).get("cells", [])
            text = "\n".join("".join(c.get("source", [])) for c in cells if c.get("cell_type") == "code")
        yield str(path.relative_to(root)), text


def _names(import_list: str) -> list[str]:
    names = []
    for part in import_list.strip().strip("()").replace("\\", "").split(","):
        name = part.strip().split(" as ")[0].strip()
        if re.fullmatch(r"[A-Za-z_]\w*", name):
            names.append(name)
    return names


def census(root: Path) -> list[tuple[str, str, str, str]]:
    tree = AITuneTree(root)
    sources: dict[tuple[str, str], set[str]] = {}

    def add(module: str, name: str, where: str) -> None:
        sources.setdefault((module, name), set()).add(where)

    for where, text in _public_pages(root):
        for m in DOC_IMPORT.finditer(text):
            for name in _names(m.group(2)):
                add(m.group(1), name, where)
        for m in DOC_MODULE_IMPORT.finditer(text):
            add(m.group(1), "", where)
        for m in DOTTED.finditer(text):
            dotted = m.group(1)
            if tree.is_module(dotted):
                add(dotted, "", where)
            elif "." in dotted and tree.is_module(dotted.rsplit(".", 1)[0]):
                module, name = dotted.rsplit(".", 1)
                if tree.origin(module, name):
                    add(module, name, where)
        for m in SOURCE_FILE.finditer(text):
            module = m.group(1).replace("/", ".")
            if tree.is_module(module):
                add(module, "", where)
    for init in sorted((root / "aitune").rglob("__init__.py")):
        package = ".".join(init.relative_to(root).parent.parts)
        for name in tree.exports(package):
            add(package, name, "__all__")
            source = tree.imported_from(package, name)
            if source and tree.is_module(source):
                add(source, name, f"{package}.__all__")
    for module, names in EXTRA_NAMES.items():
        for name in names:
            add(module, name, "guides and tests (issue 28)")

    rows = []
    for (module, name), where in sorted(sources.items()):
        if not tree.is_module(module):
            origin = NOT_IN_AITUNE
        else:
            origin = (tree.origin(module, name) if name else f"{module}:") or NOT_IN_AITUNE
        rows.append((module, name, origin, ", ".join(sorted(where))))
    return rows


# The origin of a path AITune's pages import although AITune's package lacks it (a doc slip):
# aitune provides it all the same, since a user copies the page.
NOT_IN_AITUNE = "(shown in AITune's docs, missing from its package)"

BEGIN = "# BEGIN GENERATED by tools/compat/aitune_census.py: do not edit by hand"
END = "# END GENERATED"


LINE_LENGTH = 120  # the project's ruff setting; rows are written the way `ruff format` writes them
MAX_SOURCES = 3


def _sources(where: str) -> str:
    names = where.split(", ")
    more = len(names) - MAX_SOURCES
    return ", ".join(names[:MAX_SOURCES]) + (f" (+{more} more)" if more > 0 else "")


def render(rows: list[tuple[str, str, str, str]], commit: str) -> str:
    lines = [BEGIN, f'AITUNE_COMMIT = "{commit}"', "CENSUS = ["]
    for module, name, origin, where in rows:
        fields = [json.dumps(value) for value in (module, name, origin, _sources(where))]
        one_line = f"    ({', '.join(fields)}),"
        if len(one_line) <= LINE_LENGTH:
            lines.append(one_line)
        else:
            lines += ["    ("] + [f"        {field}," for field in fields] + ["    ),"]
    lines += ["]", END]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("aitune_checkout", type=Path)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="rewrite the generated block of the table")
    group.add_argument("--check", action="store_true", help="fail when the generated block is stale")
    args = parser.parse_args()
    root = args.aitune_checkout.resolve()
    rows = census(root)
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    block = render(rows, commit or "unknown")
    table = Path(__file__).resolve().parents[2] / "tests" / "compat" / "aitune_paths.py"
    if not (args.write or args.check):
        print(block)
        return 0
    text = table.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    if args.check:
        stale = text[start:end] != block
        print(f"{table}: {'stale, run with --write' if stale else 'up to date'} ({len(rows)} rows)")
        return int(stale)
    table.write_text(text[:start] + block + text[end:], encoding="utf-8")
    print(f"{table}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
