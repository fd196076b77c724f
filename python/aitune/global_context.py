"""AITune's `aitune.global_context` (docs/guide.md, "Coming from AITune"): a stack of key/value
layers shared by the process. aitune keeps one key current itself: `BATCH_SIZE_KEY` reads the
batch size ait.tune is running the model at (None outside tuning), so a dataset or an inference
function written for AITune (`global_context.get(BATCH_SIZE_KEY, 4)`) sees the same value."""

from __future__ import annotations

import threading

from aitune.torch.global_context import current_batch_size

BATCH_SIZE_KEY = "batch_size"
LIBRARY_LOGGING_KEY = "library_logging"
BACKEND_CONTEXT_KEY = "current_backend"
MODULE_CONTEXT_KEY = "current_module"


class GlobalContext:
    """`set`/`get` on the innermost layer; `with global_context:` pushes a copy of the current
    layer and pops it on exit, so values set inside the block are gone after it."""

    def __init__(self) -> None:
        self._layers: list[dict[str, object]] = [{}]
        self._lock = threading.Lock()

    def __enter__(self) -> GlobalContext:
        with self._lock:
            self._layers.append(dict(self._layers[-1]))
        return self

    def __exit__(self, *exc: object) -> bool:
        with self._lock:
            if len(self._layers) > 1:
                self._layers.pop()
        return False

    def set(self, key: str, value: object) -> None:
        with self._lock:
            self._layers[-1][key] = value

    def get(self, key: str, default: object = None) -> object:
        """The value of `key`; while ait.tune runs the model, `BATCH_SIZE_KEY` is its batch size."""
        if key == BATCH_SIZE_KEY:
            published = current_batch_size()
            if published is not None:
                return published
        with self._lock:
            return self._layers[-1].get(key, default)


global_context = GlobalContext()
