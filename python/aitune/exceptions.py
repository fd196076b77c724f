"""Exceptions raised by aitune (docs/reference/errors.md).

Every exception derives from :class:`AITuneError`, except :class:`TuningBudgetExceeded`, an
interrupt like ``KeyboardInterrupt`` that never leaves a strategy. Where the reference raised a
builtin (``RuntimeError``, ``ValueError``, ``TypeError``, ``FileNotFoundError``,
``OSError``), the aitune class also derives from that builtin, so ``except
RuntimeError:`` clauses written against the reference keep catching it. Invalid
user input is an :class:`AITuneUserInputError`; its subclasses add the builtin the
reference raised in that place (``InvalidValueError``, ``InvalidTypeError``,
``InvalidUsageError``).

``str(error)`` is always exactly the message, also for the ``OSError`` family,
whose own ``__str__`` would otherwise format ``[Errno …]`` text.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional, Sequence, Tuple, Union

__all__ = [
    "AITuneError",
    "AITuneUserInputError",
    "InvalidValueError",
    "InvalidTypeError",
    "InvalidUsageError",
    "BackendUnavailableError",
    "NoValidBackendError",
    "CudaGraphCaptureError",
    "CorrectnessError",
    "CorrectnessValueError",
    "CorrectnessTensorShapeError",
    "CorrectnessDynamicShapeError",
    "CorrectnessNumericError",
    "GraphNotFoundError",
    "GraphBreakException",
    "ProfileShapeError",
    "CheckpointNotFoundError",
    "CorruptCheckpointError",
    "UnsupportedCheckpointError",
    "IncompatibleCheckpointError",
    "DiskSpaceError",
    "TuningBudgetExceeded",
]

PathLike = Union[str, os.PathLike]


def _rebuild(cls: type, state: dict) -> "AITuneError":
    """Recreate a pickled exception without calling the subclass ``__init__``.

    Subclasses may have their own constructor signatures (see
    :class:`IncompatibleCheckpointError`), so unpickling restores the state
    directly instead of guessing the constructor arguments.
    """
    error = cls.__new__(cls)
    AITuneError.__init__(error, state.get("message", ""))
    error.__dict__.update(state)
    return error


class AITuneError(Exception):
    """Base class of every aitune exception.

    Args:
        message: Human-readable description; ``str(error)`` returns it unchanged.
        log_path: Optional log file with details (e.g. a backend's ``build.log``).
    """

    def __init__(self, message: str, log_path: Optional[PathLike] = None) -> None:
        # One positional argument only: OSError subclasses would otherwise
        # interpret (message, log_path) as (errno, strerror).
        super().__init__(message)
        self.message: str = message
        self.log_path: Optional[Path] = Path(log_path) if log_path is not None else None

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Tuple[object, ...]:
        return _rebuild, (type(self), dict(self.__dict__))


class AITuneUserInputError(AITuneError):
    """Invalid user input: model, data, dynamic shapes or a configuration value."""


class InvalidValueError(AITuneUserInputError, ValueError):
    """An invalid value of a setting or a definition (a dynamic dimension, a profiling rule, an
    artifact path) where the reference raised ``ValueError``: both ``except ValueError`` and
    ``except AITuneUserInputError`` catch it."""


class InvalidTypeError(AITuneUserInputError, TypeError):
    """An argument of the wrong kind (a dataset that is not iterable, an object that is not
    callable) where the reference raised ``TypeError``: ``except TypeError`` catches it."""


class InvalidUsageError(AITuneUserInputError, RuntimeError):
    """A call that does not fit the object's state or setup (too few strategies for the recorded
    graphs) where the reference raised ``RuntimeError``: ``except RuntimeError`` catches it."""


class BackendUnavailableError(AITuneError, RuntimeError):
    """A backend's package or device is missing, so it cannot be built here."""


class NoValidBackendError(AITuneError, RuntimeError):
    """No candidate backend qualified for a graph (build, correctness or gate).

    ``outcome``, when a strategy raises it, says why in a form ``ait.tune`` logs as the plain
    "kept eager" line (a :class:`aitune.torch.tune_strategy.outcome.KeptEager`); None otherwise.
    """

    def __init__(self, message: str, log_path: Optional[PathLike] = None, outcome: object = None) -> None:
        super().__init__(message, log_path)
        self.outcome = outcome


class CudaGraphCaptureError(AITuneError, RuntimeError):
    """A candidate served through CUDA graphs could not be captured (a host sync or
    data-dependent control flow inside forward). Specific to the graph variant: the same build
    served without CUDA graphs is still a candidate."""


class CorrectnessError(AITuneError, ValueError):
    """Base of the correctness-check failures of docs/reference/validation.md."""


class CorrectnessValueError(CorrectnessError):
    """An output contains NaN or infinity."""


class CorrectnessTensorShapeError(CorrectnessError):
    """An output's structure or shape differs from eager."""


class CorrectnessDynamicShapeError(CorrectnessError):
    """The min/max-shape run of a candidate failed."""


class CorrectnessNumericError(CorrectnessError):
    """Outputs differ numerically from eager beyond the tolerance."""


class GraphNotFoundError(AITuneError, RuntimeError):
    """A call at run time matches no tuned graph."""


class GraphBreakException(AITuneError, RuntimeError):
    """JIT tuning's graph-break probe (`jit_config.detect_graph_breaks`) found a graph break in a
    module: it stays eager and its children are tried. AITune's name, at
    `aitune.torch.jit.patched_module`."""


class ProfileShapeError(AITuneError, RuntimeError):
    """An input lies outside the tuned profiles or has the wrong dtype."""


class CheckpointNotFoundError(AITuneError, FileNotFoundError):
    """The checkpoint file does not exist."""


class CorruptCheckpointError(AITuneError, ValueError):
    """The checkpoint is damaged or unsafe (hash mismatch, path escape, ...). The reference raised
    ``ValueError`` for both."""


class UnsupportedCheckpointError(AITuneError, ValueError):
    """The checkpoint format (version, backend type, reference format) is not readable. The
    reference raised ``ValueError`` for an unknown backend type."""


Mismatch = Tuple[str, object, object]


class IncompatibleCheckpointError(AITuneError):
    """The checkpoint was made on a hardware/software stack this one cannot run.

    Args:
        mismatches: ``(component, saved, current)`` triples, each optionally
            followed by a fourth element: a context string naming what needs
            the component (e.g. ``"TensorRT plan of module 'm' graph '0'"``).
            A plain string is taken as an already formatted message (used where
            the error comes from the C++ core as text).
        log_path: Optional log file.

    ``.mismatches`` holds the triples; the message has one line per mismatch:
    ``gpu_sm: saved 9.0, current 8.9 (TensorRT plan of module 'm' graph '0')``.
    """

    def __init__(
        self,
        mismatches: Union[str, Iterable[Sequence[object]]],
        log_path: Optional[PathLike] = None,
    ) -> None:
        if isinstance(mismatches, str):
            super().__init__(mismatches, log_path)
            self.mismatches: list = []
            return
        triples = []
        lines = []
        for entry in mismatches:
            if len(entry) not in (3, 4):
                raise ValueError(f"Each mismatch must be (component, saved, current[, context]), got {entry!r}")
            component, saved, current = entry[0], entry[1], entry[2]
            context = entry[3] if len(entry) == 4 else None
            triples.append((component, saved, current))
            line = f"{component}: saved {saved}, current {current}"
            lines.append(f"{line} ({context})" if context else line)
        super().__init__("\n".join(lines), log_path)
        self.mismatches = triples


class DiskSpaceError(AITuneError, OSError):
    """The aitune cache device is full (ENOSPC); always propagates out of tuning."""


class TuningBudgetExceeded(BaseException):
    """The tuning budget ran out while a candidate was building (docs/reference/strategies.md#tuning-budget).

    Raised asynchronously (SIGALRM) into the build, so it derives from ``BaseException``, as
    ``KeyboardInterrupt`` does: a compiler's ``except Exception:`` around one step must not swallow
    it and go on building. The strategy catches it, abandons the candidate and skips the rest; it
    never reaches the caller of ``ait.tune``."""
