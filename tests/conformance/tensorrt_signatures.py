"""pybind11 signature text, parsed and compared with Python functions.

The real bindings describe each overload as `name(self: tensorrt.X, a: T, b: U = default) -> R`
(see tensorrt_surface_child.py). Types are normalised to one vocabulary shared by TensorRT 10.x
(`int`, `List[int]`, `buffer`) and 11.x (`typing.SupportsInt`, `collections.abc.Sequence[...]`,
`typing_extensions.Buffer`), which is also the vocabulary of the fake's annotations
(tests/fakes/fake_trt_strict.py)."""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any, Callable

_ALIASES = {
    "typing.SupportsInt": "int",
    "typing.SupportsFloat": "float",
    "buffer": "Buffer",
    "typing_extensions.Buffer": "Buffer",
    "collections.abc.Buffer": "Buffer",
    "nvonnxparser::IParserError": "ParserError",
}


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    types: frozenset[str]
    has_default: bool


@dataclasses.dataclass(frozen=True)
class Signature:
    params: tuple[Param, ...]  # without self
    returns: frozenset[str]


def normalize_type(text: str) -> frozenset[str]:
    """`typing.Optional[X]`, `X | None` -> {X, None}; sequences -> Sequence[T]; aliases folded."""
    text = text.strip()
    optional = re.fullmatch(r"(?:typing\.)?Optional\[(.*)\]", text)
    if optional:
        return normalize_type(optional.group(1)) | {"None"}
    if "|" in text and "[" not in text:
        return frozenset().union(*(normalize_type(part) for part in text.split("|")))
    sequence = re.fullmatch(r"(?:typing\.)?(?:List|list|collections\.abc\.Sequence|Sequence)\[(.*)\]", text)
    if sequence:
        return frozenset({f"Sequence[{'|'.join(sorted(normalize_type(sequence.group(1))))}]"})
    text = _ALIASES.get(text, text)
    if text.startswith("tensorrt."):
        text = text[len("tensorrt.") :]
    return frozenset({text})


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts]


def parse(text: str) -> Signature:
    """One pybind11 signature line (a method `name(...) -> R` or an accessor `(...) -> R`)."""
    match = re.fullmatch(r"[A-Za-z_0-9]*\((.*)\)(?: -> (.*))?", text.strip())
    if not match:
        raise ValueError(f"not a pybind11 signature: {text!r}")
    params = []
    for part in _split_top_level(match.group(1)):
        name, _, rest = part.partition(":")
        type_text, has_default, _ = rest.partition("=")
        params.append(Param(name.strip(), normalize_type(type_text), bool(has_default)))
    return Signature(tuple(params[1:]), normalize_type(match.group(2) or "None"))


def of_function(function: Callable) -> Signature:
    """The signature of a fake method from its (string) annotations, in the same vocabulary."""
    params = []
    for p in list(inspect.signature(function).parameters.values())[1:]:
        annotation = p.annotation if p.annotation is not inspect.Parameter.empty else "object"
        params.append(Param(p.name, normalize_type(str(annotation)), p.default is not inspect.Parameter.empty))
    returns = inspect.signature(function).return_annotation
    return Signature(
        tuple(params), normalize_type(str(returns)) if returns is not inspect.Parameter.empty else frozenset({"object"})
    )


def accepts(real: Signature, fake: Signature, enum_names: set[str], return_subtypes: Any = None) -> str | None:
    """Why `fake` is not a permitted narrowing of the real overload `real`, or None when it is:
    same parameter names in order (the fake may leave out trailing parameters the real one
    defaults), each parameter accepting no type the real one refuses, a default only where the
    real one has one, and a return type the real one can return (a class pointer may be None)."""
    if len(fake.params) > len(real.params):
        return f"takes {len(fake.params)} arguments, the real one {len(real.params)}"
    primitive = {"None", "bool", "int", "float", "str", "object", "tuple", "list", "Buffer", "Dims", "Sequence[int]"}
    primitive |= enum_names
    for mine, theirs in zip(fake.params, real.params):
        if mine.name != theirs.name:
            return f"parameter {mine.name!r} is {theirs.name!r} in TensorRT"
        accepted = set(theirs.types)
        if accepted - primitive:
            accepted.add("None")  # pybind11 passes None as a null pointer for a class parameter
        extra = mine.types - accepted
        if extra:
            return f"parameter {mine.name!r} accepts {sorted(extra)}, TensorRT only {sorted(theirs.types)}"
        if mine.has_default and not theirs.has_default:
            return f"parameter {mine.name!r} has a default, TensorRT's has none"
    missing = [p.name for p in real.params[len(fake.params) :] if not p.has_default]
    if missing:
        return f"lacks the required parameters {missing}"
    allowed = set(real.returns)
    if allowed - primitive:
        allowed.add("None")  # pybind11 returns None for a null class pointer
    extra = fake.returns - allowed
    if extra and "object" not in real.returns:
        return f"returns {sorted(extra)}, TensorRT {sorted(real.returns)}"
    return None
