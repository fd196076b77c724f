"""aitune: an inference auto-tuner for PyTorch with a C++ core."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("aitune")
except _metadata.PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+unknown"
