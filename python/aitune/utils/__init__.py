"""AITune's `aitune.utils` (docs/guide.md, "Coming from AITune"): the logging helpers and the
monitoring annotations (utils/monitoring/) that AITune's examples import."""

from aitune.utils.logging import set_module_level, setup_logging

__all__ = ["set_module_level", "setup_logging"]
