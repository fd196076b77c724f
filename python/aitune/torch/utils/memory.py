"""Resource faults while tuning (docs/guide.md "Faults while tuning"): a candidate that runs out of
memory or disk fails like any other, and what it held is given back before the next one starts."""

from __future__ import annotations

import errno
import gc
import shutil
import traceback
from pathlib import Path
from typing import Iterator

import torch


def _chain(error: BaseException) -> Iterator[BaseException]:
    """`error` and the errors it was raised from or while handling (a check that wraps a
    candidate's failure keeps it as the cause)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_out_of_memory(error: BaseException) -> bool:
    """torch's allocator error, or a CUDA kernel's `out of memory` RuntimeError, in the chain."""
    return any(
        isinstance(e, torch.OutOfMemoryError) or (isinstance(e, RuntimeError) and "out of memory" in str(e).lower())
        for e in _chain(error)
    )


def is_disk_full(error: BaseException) -> bool:
    return any(isinstance(e, OSError) and e.errno == errno.ENOSPC for e in _chain(error))


def release_memory(error: BaseException | None = None) -> None:
    """Frees what a failed candidate held: the locals of the frames in `error`'s traceback (the
    tensors its build or call allocated), unreachable cycles, and the CUDA caching allocator's
    unused blocks, so the next candidate (or another process) gets the memory."""
    if error is not None and error.__traceback__ is not None:
        traceback.clear_frames(error.__traceback__)  # skips frames still running (the caller's)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def clear_failed_build(build_dir: Path, keep: Path) -> None:
    """Removes what a build that ran out of disk wrote (partial artifacts) except `keep` (its
    build.log): nothing half-written stays behind, and the space goes to the next candidate."""
    for entry in Path(build_dir).iterdir() if Path(build_dir).is_dir() else ():
        if entry == keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
