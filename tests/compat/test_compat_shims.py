"""The compatibility shims stay few, thin and recognisable (docs/guide.md, "Coming from AITune"):

* a module that only re-exports (a docstring, imports, `__all__`) is an AITune path of the census
  (aitune_paths.py) — a package `__init__` aside — and starts with the one shim banner;
* no aitune module imports a shim: aitune's own code names the real module.

The source is read with `ast`; nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from aitune_paths import CENSUS

PACKAGE_ROOT = next(p / "python" for p in Path(__file__).resolve().parents if (p / "python" / "aitune").is_dir())
BANNER = '"""AITune 0.6 import path, re-exporting aitune\'s objects (tests/compat/aitune_paths.py; docs/guide.md)."""'
AITUNE_PATHS = {module for module, _, _, _ in CENSUS}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((PACKAGE_ROOT / "aitune").rglob("*.py")):
        parts = path.relative_to(PACKAGE_ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _is_reexport_only(tree: ast.Module) -> bool:
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return bool(body) and all(
        isinstance(node, (ast.Import, ast.ImportFrom))
        or (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"])
        for node in body
    )


def _shims() -> dict[str, Path]:
    return {
        name: path
        for name, path in MODULES.items()
        if path.name != "__init__.py" and _is_reexport_only(ast.parse(path.read_text(encoding="utf-8")))
    }


SHIMS = _shims()


def test_the_shims_are_found():
    assert {"aitune.torch.dynamic_shapes", "aitune.torch.module.graph_spec", "aitune.torch.module.locator"} <= set(
        SHIMS
    )


def test_every_reexport_only_module_is_an_aitune_path():
    outside = sorted(name for name in SHIMS if name not in AITUNE_PATHS)
    assert not outside, (
        "modules that only re-export but are no AITune path (aitune code imports the real module; "
        f"a new AITune path belongs in the census): {outside}"
    )


@pytest.mark.parametrize("name", sorted(SHIMS))
def test_a_shim_starts_with_the_banner_and_holds_nothing_else(name):
    text = SHIMS[name].read_text(encoding="utf-8")
    assert text.splitlines()[0] == BANNER, f"{SHIMS[name]}: the first line must be the shim banner"
    assert text.count('"""') == 2, f"{SHIMS[name]}: a shim's docstring is the banner line alone"


def _imported_modules(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from pkg import shim`
    return names


def test_no_aitune_module_imports_a_shim():
    found = []
    for name, path in MODULES.items():
        for imported in sorted(_imported_modules(ast.parse(path.read_text(encoding="utf-8"))) & set(SHIMS)):
            found.append(f"{path.relative_to(PACKAGE_ROOT)} imports the shim {imported}")
    assert not found, "import the real module instead:\n" + "\n".join(found)
