"""Serving siblings share one build (docs/guide.md, "Strategies").

A candidate with `use_cuda_graphs=True` and the same candidate without it differ only in how
the build is served, so a strategy builds the pair once: the second one processed is derived
from the first one's build (backend.py's `serving_variant`). The rules:

- a sibling whose build FAILED (an exception from the backend's own build) is skipped, with the
  reason: building it again would fail the same way;
- a sibling whose CUDA-graph serving failed (capture, or serving that could not start), or whose
  checks or gate failed, still has a usable build: the other sibling is derived from it before it
  is released, so trying the other serving costs no build;
- derived siblings not used by the end of the strategy are released.
"""

from __future__ import annotations

import logging

from aitune.torch.backend.backend import Backend, serving_variant, sibling_key

logger = logging.getLogger("aitune")


def _uses_graphs(backend: Backend) -> bool:
    return backend.cuda_graphs.requested


class SiblingBuilds:
    """Tracks, for one graph's strategy run, which candidates are still to come, which builds
    are alive and which builds failed."""

    def __init__(self, blueprints: list[Backend]) -> None:
        # (sibling key, use_cuda_graphs) of every candidate not yet processed, in order.
        self._pending: list[tuple[str, bool]] = [
            (key, _uses_graphs(b)) for b in blueprints if (key := sibling_key(b)) is not None
        ]
        self._live: dict[str, Backend] = {}  # sibling key -> a built, active backend of that build
        self._held: dict[tuple[str, bool], Backend] = {}  # derived ahead of its turn
        self._failed: dict[str, tuple[str, str]] = {}  # sibling key -> (backend, reason)

    def start(self, blueprint: Backend) -> None:
        """`blueprint` is being processed now: it is no longer pending."""
        entry = (sibling_key(blueprint), _uses_graphs(blueprint))
        if entry in self._pending:
            self._pending.remove(entry)

    def skip_reason(self, blueprint: Backend) -> str | None:
        """Why `blueprint` need not be built: its sibling's build failed."""
        key = sibling_key(blueprint)
        if key is None or key not in self._failed:
            return None
        description, reason = self._failed[key]
        return f"its serving sibling {description} failed to build ({reason}); the same build would fail again"

    def shares_a_build(self, blueprint: Backend) -> bool:
        """`blueprint` would be served from a sibling's live build (take() would succeed): it costs no build."""
        key = sibling_key(blueprint)
        if key is None:
            return False
        if (key, _uses_graphs(blueprint)) in self._held:
            return True
        source = self._live.get(key)
        return source is not None and source.is_active

    def take(self, blueprint: Backend) -> Backend | None:
        """A backend serving `blueprint`'s build the way it asks for, derived from a sibling's
        build; None when no sibling build is alive (the caller then builds it)."""
        key = sibling_key(blueprint)
        if key is None:
            return None
        wanted = _uses_graphs(blueprint)
        backend = self._held.pop((key, wanted), None)
        if backend is None:
            source = self._live.get(key)
            if source is None or not source.is_active:
                return None
            backend = serving_variant(source, wanted)
        backend.tolerance = blueprint.tolerance
        return backend

    def built(self, backend: Backend) -> None:
        """`backend` built successfully (or was derived): its build can serve its siblings."""
        key = sibling_key(backend)
        if key is not None:
            self._live[key] = backend

    def build_failed(self, blueprint: Backend, error: BaseException) -> None:
        key = sibling_key(blueprint)
        if key is not None:
            first_line = (str(error).strip().splitlines() or [""])[0][:300]
            self._failed[key] = (blueprint.describe(), f"{type(error).__name__}: {first_line}")

    def before_release(self, backend: Backend) -> None:
        """`backend` is about to be deactivated: if its other serving sibling is still to come,
        derive it now so the build survives until then."""
        key = sibling_key(backend)
        if key is None or not backend.is_active:
            return
        for pending_key, wants_graphs in self._pending:
            if pending_key == key and (key, wants_graphs) not in self._held and wants_graphs != _uses_graphs(backend):
                try:
                    self._held[(key, wants_graphs)] = serving_variant(backend, wants_graphs)
                except Exception as e:  # noqa: BLE001 - the sibling is then built on its turn
                    logger.debug("Could not keep the build of %s for its sibling: %s", backend.describe(), e)

    def release(self, keep: Backend | None = None) -> None:
        """Deactivates every derived sibling that was never used (except `keep`)."""
        for backend in self._held.values():
            if backend is not keep:
                backend.deactivate()
        self._held.clear()
        self._live.clear()
