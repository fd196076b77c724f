"""The real TensorRT bindings (10.15 and 11.4) judge aitune's TensorRT glue (its source, read with
`ast`, so code paths the unit tests do not run are judged too):

* every `trt.A.B...` it names exists in both releases (module name, class member, enum member);
* every attribute it uses on a variable that holds a TensorRT object (VARIABLE_CLASSES, the
  glue's naming convention) exists on that class in both releases;
* the methods of its subclasses of TensorRT interfaces (a logger, an output allocator) have the
  names and arity the real interface calls;
* the DataType and HardwareCompatibilityLevel names it keeps as strings exist.

The unit tests run the same glue against the fake `tensorrt`, which the other file of this tier
holds to the real signatures: together they cover the calls the tests make and the names the
source uses."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import aitune

GLUE = Path(aitune.__file__).resolve().parent / "torch" / "backend" / "tensorrt"
TRT_MODULE = "trt"  # the glue's name for the `tensorrt` module
# Variables of the glue that hold TensorRT objects, by class (or enum) name.
VARIABLE_CLASSES = {
    "builder": "Builder",
    "builder_config": "IBuilderConfig",
    "network": "INetworkDefinition",
    "parser": "OnnxParser",
    "trt_profile": "IOptimizationProfile",
    "cache": "ITimingCache",
    "context": "IExecutionContext",
    "self.context": "IExecutionContext",
    "self.engine": "ICudaEngine",
    "self._runtime": "Runtime",
    "severity": "ILogger.Severity",
}


def _sources() -> dict[Path, ast.Module]:
    files = sorted(GLUE.glob("*.py"))
    assert files, f"no TensorRT glue found in {GLUE}"
    return {path: ast.parse(path.read_text(), str(path)) for path in files}


def _chain(node: ast.AST) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None for anything that is not a plain name chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _outermost_chains(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """Every maximal attribute chain (so `trt.ILogger.Severity` once, not also `trt.ILogger`)."""
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    return [
        (node.lineno, chain)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and id(node) not in inner and (chain := _chain(node))
    ]


def _member(surface: dict, owner: str, name: str) -> tuple[str | None, str | None]:
    """(kind, qualname for what it leads to) of `owner.name`; kind None when it does not exist."""
    if owner in surface["enums"]:
        return ("enum member", None) if name in surface["enums"][owner] else (None, None)
    members = surface["classes"].get(owner, {}).get("members", {})
    info = members.get(name)
    if info is None:
        for base in surface["classes"].get(owner, {}).get("bases", []):
            kind, target = _member(surface, base, name)
            if kind:
                return kind, target
        return None, None
    return info["kind"], info.get("qualname")


def _resolve(surface: dict, start: str, names: list[str]) -> str | None:
    """Why `start.names...` does not exist in `surface`, or None."""
    owner = start
    for i, name in enumerate(names):
        if name.startswith("__") and name.endswith("__"):
            return None  # Python's own attributes (__version__, __name__)
        kind, target = _member(surface, owner, name)
        if kind is None:
            return f"{'.'.join([owner, *names[: i + 1]][-2:])} is not in TensorRT {surface['version']}"
        if kind != "nested":
            return None  # a method, property or enum member: what follows belongs to its value
        owner = target
    return None


def _module_name(surface: dict, names: list[str]) -> str | None:
    first = names[0]
    if first == "__version__":
        return None
    kind = surface["module"].get(first)
    if kind is None:
        return f"tensorrt.{first} is not in TensorRT {surface['version']}"
    if kind in ("class", "enum") and len(names) > 1:
        return _resolve(surface, first, names[1:])
    return None


def test_every_tensorrt_name_the_glue_uses_exists_in_each_supported_release(tensorrt_surfaces):
    problems, seen_variables = [], set()
    for path, tree in _sources().items():
        for line, chain in _outermost_chains(tree):
            where = f"{path.name}:{line} {'.'.join(chain)}"
            for version, surface in sorted(tensorrt_surfaces.items()):
                if chain[0] == TRT_MODULE and len(chain) > 1:
                    why = _module_name(surface, chain[1:])
                else:
                    variable = next(
                        (
                            v
                            for v in VARIABLE_CLASSES
                            if chain[: len(v.split("."))] == v.split(".") and len(chain) > len(v.split("."))
                        ),
                        None,
                    )
                    if variable is None:
                        continue
                    seen_variables.add(variable)
                    why = _resolve(surface, VARIABLE_CLASSES[variable], chain[len(variable.split(".")) :][:1])
                if why:
                    problems.append(f"{where}: {why}")
    assert not problems, "aitune's TensorRT glue uses names TensorRT does not have:\n" + "\n".join(problems)
    unused = set(VARIABLE_CLASSES) - seen_variables
    assert not unused, f"VARIABLE_CLASSES names variables the glue no longer has (update the table): {sorted(unused)}"


def _interface_methods(surface: dict, interface: str) -> dict[str, int]:
    """{method: number of arguments after self} that TensorRT calls on an application subclass:
    the real class's methods, and the `def` lines of the example in its docstring."""
    found = {}
    info = surface["classes"][interface]
    for name, member in info["members"].items():
        if member["kind"] == "method" and member["signatures"] and not name.startswith("_"):
            found[name] = len(member["signatures"][0].split(",")) - 1
    for name, args in re.findall(r"def (\w+)\(self(?:, ([^)]*))?\)", info["doc"]):
        if name != "__init__":
            found[name] = len([a for a in args.split(",") if a.strip()])
    return found


def test_the_glue_implements_tensorrt_interfaces_with_the_names_tensorrt_calls(tensorrt_surfaces):
    problems, implemented = [], 0
    for path, tree in _sources().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [_chain(b) for b in node.bases]
            interface = next((b[1] for b in bases if b and b[0] == TRT_MODULE and len(b) == 2), None)
            if interface is None:
                continue
            implemented += 1
            for version, surface in sorted(tensorrt_surfaces.items()):
                expected = _interface_methods(surface, interface)
                for method in node.body:
                    if not isinstance(method, ast.FunctionDef) or method.name.startswith("_"):
                        continue
                    arity = len(method.args.args) - 1
                    if method.name not in expected:
                        problems.append(
                            f"{path.name}:{method.lineno} {node.name}.{method.name}: TensorRT {version}'s "
                            f"{interface} calls no such method (it calls {sorted(expected)})"
                        )
                    elif expected[method.name] != arity:
                        problems.append(
                            f"{path.name}:{method.lineno} {node.name}.{method.name} takes {arity} "
                            f"arguments, TensorRT {version} passes {expected[method.name]}"
                        )
    assert implemented >= 2, "expected the glue's logger and output allocator"
    assert not problems, "\n".join(problems)


def test_the_names_the_glue_keeps_as_strings_exist(tensorrt_surfaces):
    from aitune.torch.backend.tensorrt.tensorrt_config import COMPATIBILITY_LEVELS
    from aitune.torch.backend.tensorrt.engine_runner import _TRT_TO_TORCH

    for version, surface in tensorrt_surfaces.items():
        assert set(_TRT_TO_TORCH) <= set(surface["enums"]["DataType"]), version
        assert set(COMPATIBILITY_LEVELS) <= set(surface["enums"]["HardwareCompatibilityLevel"]), version
