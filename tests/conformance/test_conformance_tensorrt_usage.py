"""The real TensorRT bindings (10.15 and 11.4) judge aitune's TensorRT glue: the checkout's source
(python/aitune/torch/backend/tensorrt, read with `ast`, so code paths the unit tests do not run are
judged too, and a stale installed aitune cannot hide a change):

* every TensorRT name it uses exists in both releases, along whole attribute chains, on every value
  that holds a TensorRT object (tensorrt_usage.py types them: the module and anything assigned from
  it, method results and properties by their real signatures, and the VARIABLE_CLASSES names);
* every call of a TensorRT method or constructor passes keyword names and a number of positional
  arguments one of the real overloads takes;
* the methods of its subclasses of TensorRT interfaces (a logger, an output allocator) have the
  names and arity the real interface calls;
* the DataType and HardwareCompatibilityLevel names it keeps as strings exist.

A mutation test copies the glue, injects a keyword typo, a second-level attribute typo and a
misspelling on a variable outside VARIABLE_CLASSES, and requires the checks to report each one.

The unit tests run the same glue against the fake `tensorrt`, which the other file of this tier
holds to the real signatures: together they cover the calls the tests make and the names the
source uses."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
from tensorrt_usage import TRT_MODULE, VARIABLE_CLASSES, check_sources, variables_used

CHECKOUT = Path(__file__).resolve().parents[2] / "python" / "aitune" / "torch" / "backend"
GLUE = CHECKOUT / "tensorrt"


def _sources(folder: Path = GLUE) -> dict[Path, ast.Module]:
    files = sorted(folder.glob("*.py"))
    assert files, f"no TensorRT glue found in {folder}"
    return {path: ast.parse(path.read_text(), str(path)) for path in files}


def _chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def test_every_tensorrt_name_and_keyword_the_glue_uses_exists_in_each_supported_release(tensorrt_surfaces):
    problems = []
    for version, surface in sorted(tensorrt_surfaces.items()):
        problems += check_sources(GLUE, surface)
    assert not problems, "aitune's TensorRT glue uses names TensorRT does not have:\n" + "\n".join(problems)
    unused = set(VARIABLE_CLASSES) - variables_used(GLUE)
    assert not unused, f"VARIABLE_CLASSES names variables the glue no longer has (update the table): {sorted(unused)}"


# (file, text in the glue, its misspelling, what the report must name)
MUTANTS = [
    ("builder.py", "ignore_mismatch=False", "ignore_mismatc=False", "ignore_mismatc"),  # a keyword
    ("engine_runner.py", "self._trt.TensorLocation.HOST", "self._trt.TensorLocation.HOTS", "TensorLocation.HOTS"),
    ("builder.py", "tuple(tensor.shape)", "tuple(tensor.shap)", "ITensor.shap"),  # not a VARIABLE_CLASSES name
]


@pytest.mark.parametrize("file, text, typo, named", MUTANTS, ids=["keyword", "second-level", "inferred-variable"])
def test_a_misspelling_injected_into_a_copy_of_the_glue_is_caught(tensorrt_surfaces, tmp_path, file, text, typo, named):
    copy = tmp_path / "tensorrt"
    shutil.copytree(GLUE, copy)
    source = (copy / file).read_text()
    assert text in source, f"{file} no longer has {text!r}: choose another mutant"
    (copy / file).write_text(source.replace(text, typo, 1))
    for version, surface in sorted(tensorrt_surfaces.items()):
        problems = check_sources(copy, surface)
        assert len(problems) == 1 and named in problems[0] and file in problems[0], (version, problems)


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


def _string_names(path: Path, variable: str) -> set[str]:
    """The string keys or items the checkout assigns to `variable` (a dict, a tuple, item assignments)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == variable for t in node.targets):
            items = node.value.keys if isinstance(node.value, ast.Dict) else getattr(node.value, "elts", [])
            names |= {item.value for item in items if isinstance(item, ast.Constant)}
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _chain(target.value) == [variable]:
                    names.add(ast.literal_eval(target.slice))
    assert names, f"{path.name} has no {variable}"
    return names


def test_the_names_the_glue_keeps_as_strings_exist(tensorrt_surfaces):
    dtypes = _string_names(GLUE / "engine_runner.py", "_TRT_TO_TORCH")
    levels = _string_names(GLUE / "tensorrt_config.py", "COMPATIBILITY_LEVELS")
    for version, surface in tensorrt_surfaces.items():
        assert dtypes <= set(surface["enums"]["DataType"]), version
        assert levels <= set(surface["enums"]["HardwareCompatibilityLevel"]), version
