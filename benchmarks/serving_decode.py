"""The worker's host cost per request on the event loop, without Dynamo (issue 26): what a tuned
module's embedding worker does between the request dict and the batcher, and for an embedding
after the batch. One image of 3*224*224 uint8 pixel values (the ResNet row of serving_gpu.py)
and one 128-token BERT request, decoded from JSON as the worker gets them.

    python benchmarks/serving_decode.py [--repeat 30]

Steps, best of `--repeat` (ms per request):
  view    the request as the worker hands it to `serve` (DynamoWorker's wrap into `Request`)
  check   token_sequences: the ids are a list of ints (refusing floats, bools, text)
  tensor  ModuleEngine.item: the item's tensor in the graph's dtype
  pack    (BERT) the 768-float embedding row into OpenAI's response
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch

from aitune.dynamo import DynamoWorkerConfig
from aitune.dynamo import worker as worker_module
from aitune.dynamo.module_engine import ItemShape, ModuleEngine
from aitune.dynamo.packing import pack_embeddings
from aitune.dynamo.requests import Request, token_sequences


def engine_for(dtype: torch.dtype, length: int) -> ModuleEngine:
    engine = ModuleEngine.__new__(ModuleEngine)  # only the item shapes, no module
    engine.shapes = [ItemShape("g", dtype, [length], [length], [1, 2, 4, 8])]
    engine.device = torch.device("cpu")
    return engine


def viewer(engine: ModuleEngine):
    """What the worker's handler does to the request before FunctionWorker.serve (a copy into
    `Request` before `request_view` existed)."""
    worker = worker_module.FunctionWorker(lambda x: x, DynamoWorkerConfig(type="embedding", model_path="m"))
    worker.engine = engine
    return getattr(worker, "request_view", Request)


def best_ms(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def measure(name: str, request: dict, dtype: torch.dtype, repeat: int, row: torch.Tensor | None) -> dict:
    engine = engine_for(dtype, len(request["input"]))
    view = viewer(engine)
    viewed = view(request)
    ids = token_sequences(viewed)[0]
    steps = {
        "view": best_ms(lambda: view(request), repeat),
        "check": best_ms(lambda: token_sequences(viewed), repeat),
        "tensor": best_ms(lambda: engine.item(ids, 0), repeat),
    }
    if row is not None:  # the batcher's row as the worker packs it: the tensor, or (before request_view) its tolist()
        current = hasattr(worker_module.FunctionWorker, "request_view")
        steps["pack"] = best_ms(lambda: pack_embeddings([row if current else row.tolist()], "m"), repeat)
    steps["total"] = sum(steps.values())
    print(f"{name:<28}" + "  ".join(f"{k} {v:8.4f}" for k, v in steps.items()))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(0)
    image = json.loads(json.dumps({"model": "m", "input": [rng.randrange(256) for _ in range(3 * 224 * 224)]}))
    bert = json.loads(json.dumps({"model": "m", "input": [rng.randrange(30522) for _ in range(128)]}))
    print(f"ms per request, best of {args.repeat}; torch {torch.__version__}")
    measure("image 3*224*224 uint8", image, torch.uint8, args.repeat, None)
    measure("BERT 128 tokens int64", bert, torch.int64, max(args.repeat, 2000), torch.randn(768))


if __name__ == "__main__":
    main()
