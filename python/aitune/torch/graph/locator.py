"""Container rules for flattening inputs and outputs (docs/reference/recording.md#binding-flattening-and-names), and the
path forms.

The walk itself is native (aitune._C flattens built-in containers without calling Python);
this module owns the rules for every other type, which the native walker asks once per type:
UserDict-like mappings, dataclasses, registered user types and ignored types.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import threading
from typing import Union

from aitune._native import _C

# Rule numbers understood by the native walker (cpp/python/flatten.h).
_LEAF, _IGNORE, _MAPPING_DATA, _FIELDS, _USER_TYPE = 0, 1, 2, 3, 4

# A str for a top-level leaf, a tuple of keys and indices when nested, () for a whole output.
SemanticPath = Union[str, tuple]


class Locator:
    """Registry of the types the flattener traverses or drops beyond the built-in containers."""

    _lock = threading.Lock()
    _user_types: dict[type, bool] = {}
    _ignored: set[type] = set()

    @classmethod
    def register_user_type(cls, user_type: type, only_tensors: bool = False) -> None:
        """Traverse instances of `user_type` by their public, non-callable, non-property
        attributes in sorted order; with `only_tensors`, only tensor attributes are kept."""
        with cls._lock:
            cls._user_types[user_type] = only_tensors
        _C.invalidate_type_rules()

    @classmethod
    def ignore_type(cls, ignored: type) -> None:
        """Drop instances of `ignored` from flattening: they are neither leaves nor containers."""
        with cls._lock:
            cls._ignored.add(ignored)
        _C.invalidate_type_rules()

    @classmethod
    def unregister_user_type(cls, user_type: type) -> None:
        """Undo `register_user_type`: instances are leaves (or dataclass fields) again."""
        with cls._lock:
            cls._user_types.pop(user_type, None)
        _C.invalidate_type_rules()

    @classmethod
    def unignore_type(cls, ignored: type) -> None:
        """Undo `ignore_type`."""
        with cls._lock:
            cls._ignored.discard(ignored)
        _C.invalidate_type_rules()

    @classmethod
    def _classify(cls, tp: type) -> tuple[int, list[str] | None]:
        for ignored in cls._ignored:
            if issubclass(tp, ignored):
                return _IGNORE, None
        if issubclass(tp, collections.UserDict):
            return _MAPPING_DATA, None
        for user_type in cls._user_types:
            if issubclass(tp, user_type):
                return _USER_TYPE, None
        if dataclasses.is_dataclass(tp):
            return _FIELDS, [f.name for f in dataclasses.fields(tp)]
        return _LEAF, None

    @classmethod
    def _user_type_attributes(cls, obj: object) -> list[str]:
        import torch

        only_tensors = next((flag for t, flag in cls._user_types.items() if isinstance(obj, t)), False)
        names = set()
        for klass in type(obj).__mro__:
            for name, value in vars(klass).items():
                if name.startswith("_") or isinstance(value, property) or callable(value):
                    continue
                names.add(name)
        names.update(name for name in getattr(obj, "__dict__", {}) if not name.startswith("_"))
        result = []
        for name in sorted(names):
            value = getattr(obj, name, None)
            if callable(value) and not isinstance(value, torch.Tensor):
                continue
            if only_tensors and not isinstance(value, torch.Tensor):
                continue
            result.append(name)
        return result


_C.set_type_rules(Locator._classify, Locator._user_type_attributes)


def semantic_path(steps: tuple) -> SemanticPath:
    """The leaf identity: keys, indices and attribute names; a bare value at depth one."""
    keys = tuple(key for _, key in steps)
    if len(keys) == 1:
        return keys[0]
    return keys


def access_path(steps: tuple, root: str | None = None) -> str:
    """Python-like display string: ``options["mask"]``, ``items[0]``, ``request.image``,
    ``output[0]``. `root` prefixes output paths ("output")."""
    text = root or ""
    for kind, key in steps:
        if kind == "p":
            text += str(key)
        elif kind == "a":
            text += f".{key}"
        elif kind == "i" or (kind == "k" and isinstance(key, int)):
            text += f"[{key}]"
        else:
            text += f'["{key}"]' if isinstance(key, str) else f"[{key!r}]"
    return text


_NAME_CLEANUP = re.compile(r"[^A-Za-z0-9_]+")


def tensor_name(path: SemanticPath, prefix: str) -> str:
    """ONNX / TensorRT / C++ tensor name: ``input_x``, ``input_options_mask``, ``output_0``;
    the whole output (path ``()``) is ``output``."""
    if path == ():
        return prefix
    return f"{prefix}_" + _NAME_CLEANUP.sub("_", repr(path)).strip("_")
