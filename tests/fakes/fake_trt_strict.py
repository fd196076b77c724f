"""What makes the fake `tensorrt` (fake_tensorrt.py) as strict as the pybind11 module it stands in
for: an instance takes no attribute its class does not define, a class without a Python
constructor cannot be instantiated, a method or property refuses a value of the wrong type, and
it returns what its annotation says.

The annotations use the real signatures' vocabulary (`int`, `bool`, `str`, `tuple`, `list`,
`Buffer`, `Dims`, `object`, the names of TensorRT classes and enums, `X | None`); the conformance
tier (tests/conformance/test_conformance_tensorrt_fake.py) checks every fake name and annotation
against the real 10.x and 11.x bindings, so these checks are the real library's checks.
"""

from __future__ import annotations

import enum
import functools
import inspect
import sys
from typing import Any, Callable

MODULE = "tensorrt"
FAKE_MODULES = ("fake_tensorrt", "fake_tensorrt_runtime", "fake_trt_strict")


def _fake_module() -> Any:
    return sys.modules["fake_tensorrt"]


def is_fake_class(cls: type) -> bool:
    """True for the fake's own classes, False for subclasses a user (aitune) writes, which get a
    __dict__ like Python subclasses of pybind11 classes do."""
    return cls.__module__ in FAKE_MODULES


class TrtObject:
    """Base of the fake's classes. The state a fake keeps lives in `_fake_*` attributes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"{MODULE}.{type(self).__name__}: No constructor defined!")

    @classmethod
    def _fake_new(cls, **state: Any) -> Any:
        """How the fake itself creates objects TensorRT hands out (engines, contexts, configs)."""
        obj = object.__new__(cls)
        for name, value in state.items():
            object.__setattr__(obj, f"_fake_{name}", value)
        return obj

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_fake_") or not is_fake_class(type(self)):
            object.__setattr__(self, name, value)
            return
        descriptor = getattr(type(self), name, None)
        if not isinstance(descriptor, property):
            raise AttributeError(f"'{MODULE}.{type(self).__name__}' object has no attribute '{name}'")
        if descriptor.fset is None:
            raise AttributeError(f"property '{name}' of '{MODULE}.{type(self).__name__}' object has no setter")
        descriptor.fset(self, value)


class TrtEnum(enum.Enum):
    """A pybind11 enum: members have .name and .value and convert with int(), but do not equal
    ints (no arithmetic enum in the real bindings)."""

    def __int__(self) -> int:
        return self.value

    __index__ = __int__


def _type_names(annotation: str) -> list[str]:
    return [part.strip() for part in annotation.split("|")]


def _resolve(name: str) -> Any:
    obj = _fake_module()
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _ints(value: Any) -> bool:
    return all(isinstance(d, int) and not isinstance(d, bool) for d in value)


def conforms(value: Any, annotation: str) -> bool:
    """Whether pybind11 would accept `value` for a parameter of this type (a subset of what it
    accepts: no implicit int<->bool conversion)."""
    for name in _type_names(annotation):
        if name == "object":
            return True
        if name == "None":
            ok = value is None
        elif name == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif name == "float":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif name == "bool":
            ok = isinstance(value, bool)
        elif name == "str":
            ok = isinstance(value, str)
        elif name in ("tuple", "list"):
            ok = type(value).__name__ == name and _ints(value)
        elif name == "Sequence[int]":
            ok = isinstance(value, (tuple, list)) and _ints(value)
        elif name == "Buffer":
            try:
                memoryview(value)
                ok = True
            except TypeError:
                ok = False
        elif name == "Dims":  # TensorRT converts tuples and lists of ints to Dims implicitly
            ok = isinstance(value, _resolve("Dims")) or (isinstance(value, (tuple, list)) and _ints(value))
        else:
            ok = isinstance(value, _resolve(name))
        if ok:
            return True
    return False


def _incompatible(qualname: str, signature: inspect.Signature, detail: str) -> TypeError:
    text = str(signature).replace("'", "")  # the annotations are strings: show them as pybind11 does
    return TypeError(
        f"{qualname}(): incompatible function arguments. The following argument types are supported:\n"
        f"    1. {qualname}{text}\n({detail})"
    )


def _checked(function: Callable, qualname: str) -> Callable:
    signature = inspect.signature(function)
    hints = function.__annotations__

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise _incompatible(qualname, signature, str(e)) from None
        for name, value in bound.arguments.items():
            if name in hints and not conforms(value, hints[name]):
                raise _incompatible(qualname, signature, f"{name}={value!r} is not {hints[name]}")
        result = function(*args, **kwargs)
        returns = hints.get("return")
        if returns is not None and not conforms(result, returns):
            raise AssertionError(f"fake {qualname} returned {result!r}, not its declared {returns}")
        return result

    wrapper.__trt_checked__ = True  # type: ignore[attr-defined]
    return wrapper


def refusal(function: Callable) -> Callable:
    """Marks a method the real class does not have, defined only to refuse what a Python base
    (ctypes, for IHostMemory's buffer) would otherwise allow."""
    function.__trt_refusal__ = True  # type: ignore[attr-defined]
    return function


class api:  # noqa: N801 - used as a decorator, like property
    """A method of a fake TensorRT class whose arguments and result are checked."""

    def __init__(self, function: Callable) -> None:
        self.function = function

    def __set_name__(self, owner: type, name: str) -> None:
        setattr(owner, name, _checked(self.function, f"{owner.__name__}.{name}"))


def api_property(getter: Callable, setter: Callable | None = None) -> property:
    """A property of a fake TensorRT class; read-only without `setter`, as in the real class."""
    name = getter.__name__
    return property(_checked(getter, f"{name}.getter"), _checked(setter, f"{name}.setter") if setter else None)
