"""What aitune's TensorRT glue uses of the bindings, read from its source with `ast` and judged
against one release's surface (extract_tensorrt_surface.py). Used by
test_conformance_tensorrt_usage.py on the checkout's glue, and on mutated copies of it to show
that a misspelling is caught.

Every expression whose value is a TensorRT object is typed: the module (`trt`, and any name or
attribute assigned from it, such as `self._trt`), its classes and enums, their members, what a
method returns and a property holds (from the real signatures), variables and `self.` attributes
assigned from typed expressions, and the parameters named in VARIABLE_CLASSES (values that come
from elsewhere). On a typed value it checks every attribute of a chain (`a.b.c`: b on a's type,
then c on b's), and for every call of a TensorRT method or constructor the keyword names and the
number of positional arguments against the real overloads."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tensorrt_signatures as sig

TRT_MODULE = "trt"  # the glue's name for the `tensorrt` module
MODULE = "<module>"
# Names and attributes of the glue whose TensorRT type comes from outside the function (a parameter,
# a field of aitune's own objects). Everything assigned from a typed expression is inferred instead.
VARIABLE_CLASSES = {
    "builder": "Builder",
    "builder_config": "IBuilderConfig",
    "network": "INetworkDefinition",
    "trt_profile": "IOptimizationProfile",
    "context": "IExecutionContext",
    "slot.context": "IExecutionContext",
    "severity": "ILogger.Severity",
}
_ENUM_MEMBER_ATTRIBUTES = {"name", "value"}


def _chain_text(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


class Surface:
    """Types and members of one release: a type is MODULE, ("class", qualname) for a class or enum
    object, ("instance", qualname) for a value of it, or ("method", qualname, name)."""

    def __init__(self, surface: dict) -> None:
        self.raw = surface
        self.version = surface["version"]

    def is_enum(self, qualname: str) -> bool:
        return qualname in self.raw["enums"]

    def member(self, owner: str, name: str) -> dict | None:
        info = self.raw["classes"].get(owner, {})
        found = info.get("members", {}).get(name)
        if found is not None:
            return found
        for base in info.get("bases", []):
            found = self.member(base, name)
            if found is not None:
                return found
        return None

    def value_type(self, returns: frozenset[str]) -> tuple | None:
        """The instance type of a return annotation when it is one TensorRT class or enum."""
        names = {re.sub(r"^nvinfer1::(v_\d+_\d+::)?", "", r) for r in returns} - {"None"}
        if len(names) != 1:
            return None
        (name,) = names
        return ("instance", name) if name in self.raw["classes"] or self.is_enum(name) else None

    def attribute(self, owner: tuple, name: str) -> tuple[tuple | None, str | None]:
        """(type of `owner.name`, why it does not exist)."""
        if name.startswith("__") and name.endswith("__"):
            return None, None  # Python's own (__init__, __version__, __name__)
        if owner == MODULE:
            kind = self.raw["module"].get(name)
            if kind is None:
                return None, f"tensorrt.{name} is not in TensorRT {self.version}"
            return (("class", name) if kind in ("class", "enum") else None), None
        kind, qualname = owner[0], owner[1]
        if self.is_enum(qualname):
            members = self.raw["enums"][qualname]
            if kind == "class" and name in members:
                return ("instance", qualname), None
            if kind == "instance" and name in _ENUM_MEMBER_ATTRIBUTES:
                return None, None
            return None, f"{qualname}.{name} is not in TensorRT {self.version}"
        info = self.member(qualname, name)
        if info is None:
            return None, f"{qualname}.{name} is not in TensorRT {self.version}"
        if info["kind"] == "nested":
            return ("class", info["qualname"]), None
        if info["kind"] == "method":
            return ("method", qualname, name), None
        if info["kind"] == "property":
            returns = (
                frozenset().union(*(sig.parse(s).returns for s in info["getter"])) if info["getter"] else frozenset()
            )
            return self.value_type(returns), None
        if info["kind"] == "attribute" and qualname.startswith("ILogger"):
            return ("instance", "ILogger.Severity"), None  # ILogger.ERROR and its siblings
        return None, None

    def overloads(self, function: tuple) -> list[sig.Signature] | None:
        """The real overloads a call of `function` (a method or a class) must match."""
        if function[0] == "method":
            info = self.member(function[1], function[2])
        elif function[0] == "class" and not self.is_enum(function[1]):
            info = self.member(function[1], "__init__")
        else:
            return None
        if not info or not info.get("signatures"):
            return None
        return [sig.parse(text) for text in info["signatures"]]


class _Checker(ast.NodeVisitor):
    def __init__(self, surface: Surface, path: Path) -> None:
        self.surface, self.path = surface, path
        self.problems: list[str] = []
        self.scopes: list[dict[str, tuple]] = [{}]
        self.attributes: dict[str, tuple] = {}  # "self.x" -> type, per class

    # -- typing -------------------------------------------------------------------------------
    def type_of(self, node: ast.AST, report: bool = True) -> tuple | None:
        text = _chain_text(node)
        if text is not None:
            for scope in reversed(self.scopes):
                if text in scope:
                    return scope[text]
            if text in self.attributes:
                return self.attributes[text]
            if text == TRT_MODULE:
                return MODULE
            if text in VARIABLE_CLASSES:
                return ("instance", VARIABLE_CLASSES[text])
        if isinstance(node, ast.Attribute):
            owner = self.type_of(node.value, report)
            if owner is None or (isinstance(owner, tuple) and owner[0] == "method"):
                return None
            found, why = self.surface.attribute(owner, node.attr)
            if why and report:
                self.problem(node, why)
            return found
        if isinstance(node, ast.Call):
            function = self.type_of(node.func, report)
            if function is None or function == MODULE:
                return None
            if function[0] == "class":
                return None if self.surface.is_enum(function[1]) else ("instance", function[1])
            if function[0] == "method":
                overloads = self.surface.overloads(function) or []
                returns = frozenset().union(*(o.returns for o in overloads)) if overloads else frozenset()
                return self.surface.value_type(returns)
        return None

    def problem(self, node: ast.AST, why: str) -> None:
        text = f"{self.path.name}:{node.lineno} {ast.unparse(node)}: {why}"
        if text not in self.problems:
            self.problems.append(text)

    # -- scopes and assignments -------------------------------------------------------------------
    def _bind(self, target: ast.AST, value_type: tuple | None) -> None:
        text = _chain_text(target)
        if text is None or value_type is None:
            return
        if text.startswith("self."):
            self.attributes[text] = value_type
        else:
            self.scopes[-1][text] = value_type

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                for one, value in zip(target.elts, node.value.elts):  # a, b = x, y
                    self._bind(one, self.type_of(value, report=False))
            else:
                self._bind(target, self.type_of(node.value, report=False))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.scopes.append({})
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast.NodeVisitor's naming

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        outer, self.attributes = self.attributes, {}
        for _ in range(2):  # attributes assigned in one method and used in an earlier one
            self.scopes.append({})
            quiet = _Checker(self.surface, self.path)
            quiet.scopes, quiet.attributes = [dict(s) for s in self.scopes], self.attributes
            for statement in node.body:
                quiet.visit(statement)
            self.scopes.pop()
        self.generic_visit(node)
        self.attributes = outer

    # -- checks ------------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.type_of(node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function = self.type_of(node.func)
        if isinstance(function, tuple):
            overloads = self.surface.overloads(function)
            if overloads:
                self._check_arguments(node, function, overloads)
        self.generic_visit(node)

    def _check_arguments(self, node: ast.Call, function: tuple, overloads: list[sig.Signature]) -> None:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return  # *args / **kwargs: not judged by name
        keywords = [k.arg for k in node.keywords]
        positional = len(node.args)
        for overload in overloads:
            names = [p.name for p in overload.params]
            if positional <= len(names) and all(k in names[positional:] for k in keywords):
                return
        name = ".".join(function[1:])
        accepted = "; ".join(f"({', '.join(p.name for p in o.params)})" for o in overloads)
        self.problem(
            node,
            f"{name} takes {accepted} in TensorRT {self.surface.version}, called with {positional} positional "
            f"argument(s) and keyword(s) {keywords}",
        )


def check_sources(folder: Path, surface: dict) -> list[str]:
    """Every use of TensorRT in the glue's .py files under `folder` that `surface` lacks."""
    files = sorted(Path(folder).glob("*.py"))
    if not files:
        raise FileNotFoundError(f"no TensorRT glue found in {folder}")
    problems = []
    judged = Surface(surface)
    for path in files:
        checker = _Checker(judged, path)
        checker.visit(ast.parse(path.read_text(), str(path)))
        problems += checker.problems
    return problems


def variables_used(folder: Path) -> set[str]:
    """The VARIABLE_CLASSES entries the glue's source still has (an entry nobody uses is stale)."""
    used = set()
    for path in sorted(Path(folder).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            text = _chain_text(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if text in VARIABLE_CLASSES:
                used.add(text)
    return used
