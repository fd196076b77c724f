"""Reading a checkpoint: any failure that is not one of aitune's documented errors means the file
is damaged (docs/guide.md "Threat model")."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from aitune.exceptions import AITuneError, CorruptCheckpointError


@contextlib.contextmanager
def as_corrupt(path: Path, passed: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """Anything but aitune's documented errors (and `passed`) while a checkpoint is read and checked
    means the file is damaged: CorruptCheckpointError, naming the file and the original error
    (docs/guide.md "Threat model")."""
    try:
        yield
    except (AITuneError, *passed):
        raise
    except RecursionError as e:
        raise CorruptCheckpointError(f"Checkpoint {path} is corrupt: a structure nests too deeply ({e})") from e
    except Exception as e:  # noqa: BLE001 - KeyError, TypeError, SafetensorError, UnicodeDecodeError, ...
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise CorruptCheckpointError(f"Checkpoint {path} is corrupt: {type(e).__name__}: {first}") from e
