import enum


class ModuleState(enum.Enum):
    """docs/reference/recording.md#module-states."""

    INIT = "init"
    RECORDING = "recording"
    PASSTHROUGH = "passthrough"
    TUNED = "tuned"
