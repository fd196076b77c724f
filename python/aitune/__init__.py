"""aitune: an inference auto-tuner for PyTorch with a C++ core."""

from aitune.__version__ import __version__

__all__ = ["__version__"]
