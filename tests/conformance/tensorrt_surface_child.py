"""Runs inside a child process that imports the real `tensorrt_bindings` (see native_stubs.py) and
prints its API surface as JSON: every class with its methods (pybind11 signatures, one per
overload), properties (getter and setter signatures) and docstrings, every enum with its members'
values, and the module's functions and constants. Standard library only."""

from __future__ import annotations

import json
import re
import sys

import tensorrt_bindings as trt

_MODULE_PREFIX = re.compile(r"\btensorrt_bindings\.tensorrt\.")


def _clean(text: str) -> str:
    return _MODULE_PREFIX.sub("tensorrt.", text)


def signatures(function: object, name: str) -> list[str]:
    """pybind11 writes `name(self: T, arg: U = default) -> R` as the docstring's first line, or one
    numbered line per overload after `name(*args, **kwargs)`; property accessors have no name."""
    doc = getattr(function, "__doc__", None) or ""
    found = []
    for line in doc.splitlines():
        line = re.sub(r"^\d+\. ", "", line.strip())
        if line.startswith(f"{name}(*args, **kwargs)"):
            continue
        if re.match(rf"^{re.escape(name)}\(.*\)( -> .*)?$", line):
            found.append(_clean(line))
    return found


def _is_enum(cls: type) -> bool:
    return isinstance(getattr(cls, "__members__", None), dict)


def _describe_class(qualname: str, cls: type, surface: dict) -> None:
    if _is_enum(cls):
        surface["enums"][qualname] = {name: int(member) for name, member in cls.__members__.items()}
        return
    members = {}
    for name, attr in vars(cls).items():
        if name.startswith("_") and name not in (
            "__init__",
            "__len__",
            "__getitem__",
            "__iter__",
            "__str__",
            "__bool__",
            "__int__",
            "__index__",
            "__buffer__",
        ):
            continue
        if isinstance(attr, property):
            members[name] = {
                "kind": "property",
                "readonly": attr.fset is None,
                "getter": signatures(attr.fget, "") if attr.fget else [],
                "setter": signatures(attr.fset, "") if attr.fset else [],
                "doc": _clean(attr.__doc__ or ""),
            }
        elif isinstance(attr, type):
            _describe_class(f"{qualname}.{name}", attr, surface)
            members[name] = {"kind": "nested", "qualname": f"{qualname}.{name}"}
        elif isinstance(attr, (staticmethod, classmethod)) or callable(attr):
            function = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            members[name] = {
                "kind": "method",
                "static": isinstance(attr, staticmethod),
                "signatures": signatures(function, name),
                "doc": _clean(function.__doc__ or ""),
            }
        else:
            members[name] = {"kind": "attribute", "type": type(attr).__name__}
    bases = [base.__name__ for base in cls.__mro__[1:] if base.__module__.startswith("tensorrt")]
    surface["classes"][qualname] = {"bases": bases, "doc": _clean(cls.__doc__ or ""), "members": members}


def main() -> None:
    surface: dict = {
        "version": trt.__version__,
        "module": {},
        "classes": {},
        "enums": {},
        "functions": {},
        "constants": {},
    }
    for name in sorted(dir(trt)):
        if name.startswith("_") and name != "__version__":
            continue
        obj = getattr(trt, name)
        if isinstance(obj, type):
            _describe_class(name, obj, surface)
            surface["module"][name] = "enum" if _is_enum(obj) else "class"
        elif callable(obj):
            surface["functions"][name] = signatures(obj, name)
            surface["module"][name] = "function"
        elif isinstance(obj, (bool, int, float, str)):
            surface["constants"][name] = obj
            surface["module"][name] = "constant"
    json.dump(surface, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
