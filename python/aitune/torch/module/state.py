import enum


class ModuleState(enum.Enum):
    """SPEC §2.1."""

    INIT = "init"
    RECORDING = "recording"
    PASSTHROUGH = "passthrough"
    TUNED = "tuned"
