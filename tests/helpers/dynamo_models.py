"""A small token-embedding model for the Dynamo serving tests: token ids [batch, 8] ->
embeddings [batch, 16]. `make_embedder` is the factory the worker CLI imports
(`--model dynamo_models:make_embedder`); `tune_and_save` tunes it on the CPU and saves the
checkpoint the workers load. Seeded, so every process builds the same weights."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

SEQUENCE = 8
VOCABULARY = 50
TUNED_BATCH_SIZES = [1, 2, 4]


class TokenEmbedder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(VOCABULARY, 32)
        self.project = torch.nn.Linear(32, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pooled = self.tokens(ids).mean(dim=1)
        return torch.nn.functional.normalize(self.project(pooled), dim=-1)


def make_embedder() -> TokenEmbedder:
    torch.manual_seed(1234)
    return TokenEmbedder().eval()


def token_ids(count: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCABULARY, (count, SEQUENCE), generator=g).tolist()


def tune_and_save(path: Path) -> Path:
    """Tunes the embedder on the CPU with the eager backend (no compiler needed) and saves it."""
    import aitune.torch as ait
    from aitune.torch.backend import TorchEagerBackend

    strategy = (
        ait.OneBackendStrategy(TorchEagerBackend())
        .enable_find_max_batch_size(False)
        .enable_performance_validation(False)
    )
    module = ait.Module(make_embedder(), "embedder", strategy=strategy)
    dataset = [torch.tensor(ids) for ids in token_ids(8)]
    ait.tune(module, dataset, batch_sizes=TUNED_BATCH_SIZES, device="cpu")
    return ait.save(module, path)


if __name__ == "__main__":  # python dynamo_models.py OUT.ait
    print(tune_and_save(Path(sys.argv[1])))
