"""A worker for the Dynamo stop tests: `python dynamo_stop_worker.py KIND NAME STARTED_FILE`.

KIND is what it serves: `tuned` (a tuned ait.Module, no mapping: the batcher), `callable` (a
function, no mapping), `mapping` (a function with a mapping callable, AITune's form) or `module`
(a plain torch module with a mapping). Each blocks for a minute on a request whose input starts
with token 49 (or whose prompt is "block"), after writing STARTED_FILE, so the test can signal
the worker while a request is in flight."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from aitune.dynamo import DynamoWorkerConfig, dynamo_worker
from dynamo_models import SEQUENCE, TokenEmbedder, token_ids

BLOCK_TOKEN = 49
BLOCK_S = 60.0


def block_if_asked(blocking: bool, started: Path) -> None:
    if blocking:
        started.write_text("started")
        time.sleep(BLOCK_S)


class BlockingEmbedder(TokenEmbedder):
    armed = False  # not while tuning
    started = Path("started")

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        block_if_asked(self.armed and bool((ids[:, 0] == BLOCK_TOKEN).any()), self.started)
        return super().forward(ids)


def tuned(name: str, started: Path):
    import aitune.torch as ait
    from aitune.torch.backend import TorchEagerBackend

    torch.manual_seed(0)
    strategy = (
        ait.OneBackendStrategy(TorchEagerBackend())
        .enable_find_max_batch_size(False)
        .enable_performance_validation(False)
    )
    module = ait.Module(BlockingEmbedder().eval(), name, strategy=strategy)
    ait.tune(module, [torch.tensor(ids) for ids in token_ids(4)], batch_sizes=[1, 2], device="cpu")
    BlockingEmbedder.armed, BlockingEmbedder.started = True, started
    return module, DynamoWorkerConfig(type="embedding", model_path=name)


def main(kind: str, name: str, started: Path) -> None:
    def embed(sentences):
        block_if_asked(sentences == "block" or sentences == ["block"], started)
        return torch.zeros(len(sentences) if isinstance(sentences, list) else 1, 4)

    if kind == "tuned":
        fn, config = tuned(name, started)
    elif kind == "callable":
        fn, config = embed, DynamoWorkerConfig(type="embedding", model_path=name)
    elif kind == "mapping":
        fn = embed
        config = DynamoWorkerConfig(type="embedding", model_path=name, mapping=lambda req: {"sentences": req.input})
    elif kind == "module":
        torch.manual_seed(0)
        model = BlockingEmbedder().eval()
        BlockingEmbedder.armed, BlockingEmbedder.started = True, started
        fn = model
        config = DynamoWorkerConfig(
            type="embedding", model_path=name, mapping=lambda req: {"ids": torch.tensor(req.input).view(-1, SEQUENCE)}
        )
    else:
        raise SystemExit(f"unknown kind {kind!r}; expected tuned, callable, mapping or module")
    dynamo_worker(fn, config)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
