"""Results store: finished tuning results reused across processes (docs/reference/tuning.md#reusing-results)."""

from aitune.torch.results.store import ResultsStore, model_fingerprint, tensor_digest

__all__ = ["ResultsStore", "model_fingerprint", "tensor_digest"]
