"""The one "wide" numeric tolerance the benchmarks share (zoo, JIT ResNet-50, round trip).

The default bands (docs/reference/validation.md#numeric-comparison) with up to 1 % of elements outside
them instead of 0.1 %; every other bound as the default. Why: with random weights most of ResNet-50's logits sit near
zero, where atol dominates, and compiled ResNet-50 put 0.6 % (fp16), 0.7 % and 0.8 % (tf32) of them outside the band at
rel_l2 1.4e-3 / 1.7e-4 / 1.3e-4, far under the rel_l2 bounds (H200, 2026-11-30).
"""

from __future__ import annotations

import dataclasses


def wide_tolerances() -> dict:
    from aitune.torch.validation import DEFAULT_TOLERANCES

    return {
        cls: dataclasses.replace(t, max_mismatch_fraction=max(t.max_mismatch_fraction, 1e-2))
        for cls, t in DEFAULT_TOLERANCES.items()
    }
