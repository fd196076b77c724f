"""AITune's import path for BuildMode and ExecutionMode (docs/guide.md, "Coming from AITune"): they live
in common/reference_contract.py."""

from aitune.torch.backend.common.reference_contract import BuildMode, Contract, ExecutionMode

__all__ = ["BuildMode", "Contract", "ExecutionMode"]
