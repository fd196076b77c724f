"""AITune's `TorchCompileMode` (docs/guide.md, "Coming from AITune"): the `mode` values that
`torch.compile` and TorchInductorJitBackendConfig accept."""

from typing import Literal

from aitune.torch.backend.torch_inductor_jit.torch_inductor_jit_config import VALID_MODES

# Literal[("a", "b")] is Literal["a", "b"]: one list of modes, in the config that validates them.
TorchCompileMode = Literal[VALID_MODES]  # type: ignore[valid-type]

__all__ = ["TorchCompileMode"]
