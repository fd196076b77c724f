"""aitune's version: the installed distribution's, or 0.0.0+unknown in a source tree that was not
installed. AITune keeps it in this module too."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("aitune")
except _metadata.PackageNotFoundError:
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
