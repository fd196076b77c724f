"""Tune strategies (SPEC §1.3). This release: the base class and OneBackendStrategy."""

from aitune.torch.tune_strategy.one_backend_strategy import OneBackendStrategy
from aitune.torch.tune_strategy.tune_strategy import TuneStrategy

__all__ = ["OneBackendStrategy", "TuneStrategy"]
