"""Results store: finished tuning results reused across processes (SPEC §3.3)."""

from aitune.torch.results.store import ResultsStore, model_fingerprint, tensor_digest

__all__ = ["ResultsStore", "model_fingerprint", "tensor_digest"]
