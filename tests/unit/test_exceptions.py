"""Behaviour of aitune.exceptions (docs/reference/errors.md)."""

import copy
import pickle
from pathlib import Path

import pytest

from aitune import exceptions as exc

BUILTIN_MIXINS = [
    (exc.BackendUnavailableError, RuntimeError),
    (exc.NoValidBackendError, RuntimeError),
    (exc.CorrectnessError, ValueError),
    (exc.CorrectnessValueError, ValueError),
    (exc.CorrectnessTensorShapeError, ValueError),
    (exc.CorrectnessDynamicShapeError, ValueError),
    (exc.CorrectnessNumericError, ValueError),
    (exc.GraphNotFoundError, RuntimeError),
    (exc.ProfileShapeError, RuntimeError),
    (exc.CheckpointNotFoundError, FileNotFoundError),
    (exc.CorruptCheckpointError, ValueError),
    (exc.UnsupportedCheckpointError, ValueError),
    (exc.InvalidValueError, ValueError),
    (exc.InvalidTypeError, TypeError),
    (exc.InvalidUsageError, RuntimeError),
    (exc.GraphBreakException, RuntimeError),
    (exc.DiskSpaceError, OSError),
]

MESSAGE_CLASSES = [cls for cls, _ in BUILTIN_MIXINS] + [
    exc.AITuneError,
    exc.AITuneUserInputError,
]


@pytest.mark.parametrize("cls, builtin", BUILTIN_MIXINS)
def test_builtin_mixins_are_caught_by_builtin_except(cls, builtin):
    with pytest.raises(builtin) as info:
        raise cls("boom")
    assert isinstance(info.value, exc.AITuneError)
    assert str(info.value) == "boom"


@pytest.mark.parametrize("cls", MESSAGE_CLASSES)
def test_message_log_path_and_str(cls, tmp_path):
    error = cls("No space left on AITune cache device; path=/x", tmp_path / "build.log")
    assert str(error) == "No space left on AITune cache device; path=/x"
    assert error.message == str(error)
    assert error.log_path == tmp_path / "build.log"
    assert cls("m").log_path is None


def test_log_path_string_becomes_path():
    assert exc.AITuneError("m", "/tmp/build.log").log_path == Path("/tmp/build.log")


@pytest.mark.parametrize("cls", MESSAGE_CLASSES)
def test_pickle_and_deepcopy_round_trip(cls):
    error = cls("broken", "/tmp/log.txt")
    for clone in (pickle.loads(pickle.dumps(error)), copy.deepcopy(error)):
        assert type(clone) is cls
        assert str(clone) == "broken"
        assert clone.log_path == Path("/tmp/log.txt")


def test_oserror_family_does_not_parse_message_as_errno():
    error = exc.DiskSpaceError("disk full", "/tmp/log")
    assert error.errno is None
    assert str(error) == "disk full"
    missing = exc.CheckpointNotFoundError("Checkpoint file not found: a.ait")
    assert str(missing) == "Checkpoint file not found: a.ait"
    assert missing.filename is None


def test_raise_from_keeps_cause():
    with pytest.raises(exc.GraphNotFoundError) as info:
        try:
            raise KeyError("graph")
        except KeyError as cause:
            raise exc.GraphNotFoundError("No backend found for a graph with metadata: x") from cause
    assert isinstance(info.value.__cause__, KeyError)


def test_correctness_subclasses_share_base():
    for cls in (
        exc.CorrectnessValueError,
        exc.CorrectnessTensorShapeError,
        exc.CorrectnessDynamicShapeError,
        exc.CorrectnessNumericError,
    ):
        assert issubclass(cls, exc.CorrectnessError)
    assert not issubclass(exc.AITuneUserInputError, ValueError)  # its subclasses add the builtin
    for cls in (exc.InvalidValueError, exc.InvalidTypeError, exc.InvalidUsageError):
        assert issubclass(cls, exc.AITuneUserInputError)


def test_incompatible_checkpoint_lines_and_triples():
    error = exc.IncompatibleCheckpointError(
        [
            ("gpu_sm", "9.0", "8.9", "TensorRT plan of module 'm' graph '0'"),
            ("tensorrt", "10.3", "10.9"),
        ]
    )
    assert str(error) == (
        "gpu_sm: saved 9.0, current 8.9 (TensorRT plan of module 'm' graph '0')\ntensorrt: saved 10.3, current 10.9"
    )
    assert error.mismatches == [("gpu_sm", "9.0", "8.9"), ("tensorrt", "10.3", "10.9")]
    clone = pickle.loads(pickle.dumps(error))
    assert clone.mismatches == error.mismatches
    assert str(clone) == str(error)


def test_incompatible_checkpoint_accepts_preformatted_message():
    error = exc.IncompatibleCheckpointError("cuda_major: saved 12, current 11")
    assert str(error) == "cuda_major: saved 12, current 11"
    assert error.mismatches == []


def test_incompatible_checkpoint_rejects_malformed_entry():
    with pytest.raises(ValueError, match="component, saved, current"):
        exc.IncompatibleCheckpointError([("gpu_sm", "9.0")])
