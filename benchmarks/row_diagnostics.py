"""What a benchmarks/defaults.py row records about its own compiles, besides its timings: torch's
FX-graph cache messages (why a warm row compiled again) and, with DEFAULTS_PROFILE=1, a profile of
a warm row (where a second process's tuning seconds go)."""

from __future__ import annotations

import re
from typing import Any


def profile_tables(profiler: Any) -> dict[str, str]:
    import io
    import pstats

    tables = {}
    for key, count in (("cumulative", 70), ("tottime", 40)):
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats(key).print_stats(count)
        tables[key] = stream.getvalue()[-12000:]
    return tables


class FxCacheLog:
    """Collects torch._inductor.codecache's messages about its FX-graph cache (hits, misses,
    bypasses and each key's hash details) without changing how anything else logs. A key's details
    are kept as one line per hashed component (`[hash] name: start of its value`): the graph
    module's code alone can fill any size limit, and the components whose hashes differ between a
    cold and a warm row are what explains a miss."""

    MAX_RECORDS = 12
    MAX_CHARS = 20000
    COMPONENT_CHARS = 240

    def __init__(self) -> None:
        import logging

        self.records: list[str] = []
        outer = self

        class _Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                message = record.getMessage()
                if "fx graph cache" in message.lower() and len(outer.records) < outer.MAX_RECORDS:
                    outer.records.append(outer.compact(message))

        source = logging.getLogger("torch._inductor.codecache")
        source.addHandler(_Handler(level=logging.DEBUG))
        source.setLevel(logging.DEBUG)

    @classmethod
    def compact(cls, message: str) -> str:
        """A hash-details message as its first line and one line per component; other messages
        (hit, miss, bypass) as they are, truncated."""
        lines = message.splitlines()
        if "hash details" not in message.lower():
            return message[: cls.MAX_CHARS]
        components = [line[: cls.COMPONENT_CHARS] for line in lines[1:] if re.match(r"\[\w+\] ", line)]
        return "\n".join([lines[0], *components])[: cls.MAX_CHARS]
