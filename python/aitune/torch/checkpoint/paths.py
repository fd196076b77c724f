"""The one way a path named by a checkpoint becomes a file to open (docs/guide.md "Threat model",
docs/reference/checkpoint.md#own-state-backends-and-state-dicts).

Every field of a checkpoint that names a file or folder -- a backend's artifacts, an own-state
backend's `{"artifact": {"folder", "relative_path"}}` and `state_tensors`, a LocalTorchStorage
state dict's, the digests of `sha512` -- is resolved here against the folder the archive was
extracted to. The C++ schema has already refused what it can see in the JSON (absolute paths,
`..`, names outside their own folder, unlisted files); this checks the file system as well: the
resolved path, links followed, must stay inside the extraction folder and exist."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from aitune.exceptions import CorruptCheckpointError


def _relative_parts(name: object, what: str) -> tuple[str, ...]:
    """The parts of a relative, '/'-separated entry path ("." alone: none)."""
    if not isinstance(name, str) or not name or "\\" in name or "\0" in name:
        raise CorruptCheckpointError(f"{what}: {name!r} is not an entry path; expected a relative '/'-separated path")
    path = PurePosixPath(name)
    if path.is_absolute() or (len(name) > 1 and name[1] == ":"):
        raise CorruptCheckpointError(f"{what}: Entry '{name}' resolves outside checkpoint (an absolute path)")
    if ".." in path.parts:
        raise CorruptCheckpointError(f"{what}: Entry '{name}' resolves outside checkpoint (it has a '..' part)")
    return tuple(p for p in path.parts if p != ".")


def resolve_entry(root: Path | None, name: object, what: str, *parts: object) -> Path:
    """The existing file or folder `root / name / parts...`, resolved (links followed).

    `root` is the extraction folder; `name` and each of `parts` are relative paths from the file
    ("." for the folder itself); `what` names the field in errors, e.g. "module 'm' graph '0':
    state artifact". CorruptCheckpointError for a path that is absolute, has a '..' part, leads
    outside `root` through a link, or does not exist."""
    names = [name, *parts]
    if root is None:
        raise CorruptCheckpointError(f"{what}: {'/'.join(map(str, names))!r} names a file, but the checkpoint has none")
    relative: tuple[str, ...] = ()
    for part in names:
        relative += _relative_parts(part, what)
    base = Path(root).resolve()
    target = base.joinpath(*relative).resolve()
    shown = "/".join(relative) or "."
    if target != base and base not in target.parents:
        raise CorruptCheckpointError(f"{what}: Entry '{shown}' resolves outside checkpoint (through a link)")
    if not target.exists():
        raise CorruptCheckpointError(
            f"{what}: Entry '{shown}' is not in the checkpoint; expected an extracted file or folder under {base}"
        )
    return target
