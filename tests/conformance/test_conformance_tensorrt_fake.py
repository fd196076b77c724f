"""The real TensorRT bindings (10.15 and 11.4) judge the fake `tensorrt` of tests/fakes: every
name it defines exists in both real modules, with the same kind (class, enum, method, property),
parameter names and no type the real signature refuses; its enum members exist with the values of
the release it claims; a property is writable only where the real one is; and the failures the
fake simulates (False, -1, None, ValueError) are the ones the real docstrings document."""

from __future__ import annotations

import collections
import enum
import inspect

import fake_tensorrt as fake
import pytest
import tensorrt_signatures as sig


def _fake_classes() -> dict[str, type]:
    module = fake.as_module()
    return {name: getattr(module, name) for name in fake.API if name != "__version__"}


def _is_enum(obj: object) -> bool:
    return isinstance(obj, type) and issubclass(obj, enum.Enum)


def _own_members(cls: type) -> dict[str, object]:
    """The members the fake class defines itself: public ones, and the dunders TensorRT defines."""
    dunders = {"__init__", "__len__", "__getitem__", "__bool__", "__str__"}
    return {
        name: attr
        for name, attr in vars(cls).items()
        if (not name.startswith("_") or name in dunders) and not getattr(attr, "__trt_refusal__", False)
    }


def _merged_overloads(signatures: list[str]) -> list[sig.Signature]:
    """Overloads with the same parameter names as one signature accepting the union of their types
    (set_input_shape takes a tuple, a list or Dims)."""
    groups: dict[tuple, list[sig.Signature]] = collections.defaultdict(list)
    for text in signatures:
        parsed = sig.parse(text)
        groups[tuple(p.name for p in parsed.params)].append(parsed)
    merged = []
    for overloads in groups.values():
        params = tuple(
            sig.Param(ps[0].name, frozenset().union(*(p.types for p in ps)), all(p.has_default for p in ps))
            for ps in zip(*(o.params for o in overloads))
        )
        merged.append(sig.Signature(params, frozenset().union(*(o.returns for o in overloads))))
    return merged


def _enum_names(surface: dict) -> set[str]:
    return set(surface["enums"])


def _check_method(surface: dict, where: str, real: dict, function: object) -> list[str]:
    if real.get("kind") != "method":
        return [f"{where}: a method in the fake, a {real.get('kind')} in TensorRT"]
    if not getattr(function, "__trt_checked__", False):
        return [f"{where}: the fake does not check its arguments (decorate it with @api)"]
    fake_sig = sig.of_function(function)
    reasons = [
        sig.accepts(real_sig, fake_sig, _enum_names(surface)) for real_sig in _merged_overloads(real["signatures"])
    ]
    if real["signatures"] and None not in reasons:
        return [
            f"{where}{inspect.signature(function)}: {'; '.join(r for r in reasons if r)} "
            f"(TensorRT: {real['signatures']})"
        ]
    if not real["signatures"]:
        return [f"{where}: TensorRT defines no Python signature for it (no constructor?)"]
    return []


def _check_property(surface: dict, where: str, real: dict, prop: property) -> list[str]:
    if real.get("kind") != "property":
        return [f"{where}: a property in the fake, a {real.get('kind')} in TensorRT"]
    problems = []
    getter = sig.of_function(prop.fget)
    real_returns = frozenset().union(*(sig.parse(s).returns for s in real["getter"]))
    if getter.returns - real_returns:
        problems.append(f"{where}: the fake returns {sorted(getter.returns)}, TensorRT {sorted(real_returns)}")
    if prop.fset is not None:
        if real["readonly"]:
            problems.append(f"{where}: writable in the fake, read-only in TensorRT")
        else:
            value = sig.of_function(prop.fset).params[0].types
            accepted = frozenset().union(*(sig.parse(s).params[0].types for s in real["setter"]))
            if value - accepted:
                problems.append(f"{where}: the fake's setter takes {sorted(value)}, TensorRT's {sorted(accepted)}")
    return problems


def _check_class(surface: dict, name: str, cls: type) -> list[str]:
    real_class = surface["classes"].get(name)
    if real_class is None:
        return [f"{name}: no such class in TensorRT {surface['version']}"]
    problems = []
    for member, attr in _own_members(cls).items():
        where = f"{name}.{member}"
        real = real_class["members"].get(member)
        if real is None:
            problems.append(f"{where}: not in TensorRT {surface['version']}")
        elif isinstance(attr, property):
            problems += _check_property(surface, where, real, attr)
        elif _is_enum(attr):
            if real.get("kind") != "nested":
                problems.append(f"{where}: a nested enum in the fake, a {real.get('kind')} in TensorRT")
            else:
                problems += _check_enum(surface, real["qualname"], attr)
        elif isinstance(attr, enum.Enum):
            if real.get("kind") != "attribute":
                problems.append(f"{where}: a constant in the fake, a {real.get('kind')} in TensorRT")
        elif callable(attr):
            problems += _check_method(surface, where, real, attr)
        else:
            problems.append(f"{where}: the fake defines {type(attr).__name__}, which the checks do not know")
    return problems


def _check_enum(surface: dict, qualname: str, cls: type) -> list[str]:
    real = surface["enums"].get(qualname)
    if real is None:
        return [f"{qualname}: no such enum in TensorRT {surface['version']}"]
    problems = [f"{qualname}.{m.name}: not in TensorRT {surface['version']}" for m in cls if m.name not in real]
    if surface["version"] == fake.__version__:
        problems += [
            f"{qualname}.{m.name} = {m.value}, TensorRT {surface['version']} has {real[m.name]}"
            for m in cls
            if m.name in real and real[m.name] != m.value
        ]
    return problems


def test_every_name_of_the_fake_exists_in_each_supported_tensorrt(tensorrt_surfaces):
    assert fake.__version__ in tensorrt_surfaces, "the fake claims a release the tier does not check"
    problems = []
    for version, surface in sorted(tensorrt_surfaces.items()):
        for name, obj in _fake_classes().items():
            kind = surface["module"].get(name)
            if _is_enum(obj):
                problems += _check_enum(surface, name, obj) if kind == "enum" else [f"{name}: {kind} in {version}"]
            else:
                problems += _check_class(surface, name, obj) if kind == "class" else [f"{name}: {kind} in {version}"]
    assert not problems, "the fake tensorrt is more permissive than the real one:\n" + "\n".join(problems)


# The failures the fake simulates, and the words of the real docstring that promise them.
DOCUMENTED_FAILURES = [
    ("IBuilderConfig", "add_optimization_profile", "or -1 if the input is"),
    ("IBuilderConfig", "set_timing_cache", "indicating whether the operation is done successfully"),
    ("IOptimizationProfile", "set_shape", ":raises: :class:`ValueError` if an inconsistency was detected"),
    ("IExecutionContext", "set_optimization_profile_async", "if the optimization profile was set successfully"),
    ("Runtime", "deserialize_cuda_engine", "or None if it could not be deserialized"),
    ("Builder", "build_serialized_network", "IHostMemory"),
    ("OnnxParser", "parse_from_file", "-> bool"),
]
RETURNS_BOOL = [
    ("IExecutionContext", name)
    for name in ("set_input_shape", "set_tensor_address", "set_output_allocator", "execute_async_v3")
]


@pytest.mark.parametrize("cls, method, words", DOCUMENTED_FAILURES)
def test_the_failures_the_fake_simulates_are_documented(tensorrt_surfaces, cls, method, words):
    for version, surface in tensorrt_surfaces.items():
        doc = " ".join(surface["classes"][cls]["members"][method]["doc"].split())
        assert " ".join(words.split()) in doc, f"TensorRT {version} {cls}.{method}: {doc[:400]}"


@pytest.mark.parametrize("cls, method", RETURNS_BOOL)
def test_the_setters_that_report_failure_with_false_return_bool(tensorrt_surfaces, cls, method):
    for version, surface in tensorrt_surfaces.items():
        returns = {r for s in surface["classes"][cls]["members"][method]["signatures"] for r in sig.parse(s).returns}
        assert returns == {"bool"}, f"TensorRT {version} {cls}.{method} returns {returns}"


def test_the_fake_is_not_bytes_where_tensorrt_hands_out_host_memory(tensorrt_surfaces):
    for version, surface in tensorrt_surfaces.items():
        members = surface["classes"]["IHostMemory"]["members"]
        assert "__len__" not in members and "__getitem__" not in members, version
        assert "buffer protocol" in surface["classes"]["IHostMemory"]["doc"], version
