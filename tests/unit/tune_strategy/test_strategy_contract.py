"""The strategy contract is declared (docs/design.md#the-strategy-contract): code outside
`tune_strategy/` uses a strategy only through its public methods, never a private member or a
`getattr` probe of one, and the device pool reaches a strategy only as the executor installed in
its GraphContext. Read from the source with `ast`, like test_layering.py."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = next(p / "python" / "aitune" for p in Path(__file__).resolve().parents if (p / "python" / "aitune").is_dir())
STRATEGIES = PACKAGE / "torch" / "tune_strategy"
PROBES = ("getattr", "hasattr", "setattr", "delattr")


def _strategy_privates() -> set[str]:
    """Private members defined by the strategy classes: `def _x` in a class body and `self._x = ...`."""
    names: set[str] = set()
    for path in STRATEGIES.glob("*.py"):
        for cls in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)):
            for node in cls.body:  # class attributes: `_title = "..."`
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
                names.update(t.id for t in targets if isinstance(t, ast.Name) and t.id.startswith("_"))
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_"):
                    names.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr.startswith("_"):
                        names.add(node.attr)
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


def _outside_files() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if STRATEGIES not in p.parents]


def _uses(privates: set[str], files: list[Path]) -> tuple[list[str], list[str]]:
    """(`x._member` uses, getattr-style probes) in `files`. `self._member` is a class's own
    attribute, whatever its name, and is not counted."""
    uses, probes = [], []
    for path in files:
        where = path.name if PACKAGE.parent not in path.parents else path.relative_to(PACKAGE.parent)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in privates:
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    uses.append(f"{where}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES:
                if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in privates:
                    probes.append(f"{where}:{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return uses, probes


def test_the_walk_knows_the_strategy_privates():
    privates = _strategy_privates()
    assert {"_tune", "_tally", "_siblings", "_build_and_validate", "_baseline_throughput"} <= privates


def test_nothing_outside_tune_strategy_uses_a_strategy_private():
    uses, probes = _uses(_strategy_privates(), _outside_files())
    assert not uses, "private strategy members used outside tune_strategy/ (declare a public method):\n" + "\n".join(
        uses
    )
    assert not probes, "getattr probes of strategy privates outside tune_strategy/:\n" + "\n".join(probes)


def test_the_walk_sees_a_private_use(tmp_path):
    """The rule fires on `strategy._tally` and `getattr(strategy, "_baseline")`, not on `self._tally`."""
    path = tmp_path / "user.py"
    path.write_text(
        "def f(strategy):\n    strategy._tally.failed += 1\n    return getattr(strategy, '_baseline', None)\n"
        "class C:\n    def g(self):\n        return self._tally\n"
    )
    uses, probes = _uses({"_tally", "_baseline"}, [path])
    assert uses == ["user.py:2: ._tally"]
    assert probes == ["user.py:3: getattr(..., '_baseline')"]
