"""aitune's own cost per request in the Dynamo worker, without Dynamo: the worker's request handler
(FunctionWorker.serve: reading the token ids, the batcher, packing the response) driven by closed-loop
asyncio clients in this process, on a tuned module served through the batcher as the worker serves
it. Prints the process's CPU time per request and, within it, the model thread's busy time.
Set beside serving_gpu.py's `worker CPU ms/request` (the same worker behind Dynamo) and its inline
echo row (Dynamo's own cost), it splits a served request's host cost between aitune and Dynamo.

    python benchmarks/serving_handler.py                       # tiny embedder on the CPU, ~10 s
    python benchmarks/serving_handler.py --size full --device cuda --requests 20000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["tiny", "full"], default="tiny", help="serving_models.py's size")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    args = parser.parse_args(argv)
    os.environ["SERVING_MODELS_SIZE"] = args.size
    os.environ.setdefault("SERVING_MODELS_DTYPE", "float32" if args.device == "cpu" else "float16")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import serving_models
    import torch

    import aitune.torch as ait
    from aitune.dynamo import DynamoWorkerConfig
    from aitune.dynamo.worker import FunctionWorker

    if args.device == "cpu":
        torch.set_num_threads(1)  # as serving_gpu.py's CPU workers
        strategy = ait.OneBackendStrategy(ait.backend.TorchEagerBackend())
        strategy = strategy.enable_find_max_batch_size(False).enable_performance_validation(False)
    else:
        strategy = ait.FirstWinsStrategy().enable_find_max_batch_size(False)
    model = ait.Module(serving_models.make_embedding().to(args.device), "embedding", strategy=strategy)
    samples = serving_models.item_samples("embedding", 32)
    ait.tune(model, samples, batch_sizes=[1, 2, 4, 8, 16, 32], device=args.device)
    config = DynamoWorkerConfig(type="embedding", model_path="m", model_name="m", max_wait_ms=args.max_wait_ms)
    worker = FunctionWorker(model, config)
    worker.setup()
    body = json.loads(serving_models.request_body("embedding", "m"))
    per_client = args.requests // args.clients

    async def client() -> None:
        for _ in range(per_client):
            async for _chunk in worker.serve(worker.request_view(dict(body))):
                pass

    async def run() -> None:
        await asyncio.gather(*(client() for _ in range(args.clients)))
        await worker.batcher.close()

    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(run())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stats = worker.batcher.stats()
    served = worker.served
    print(
        json.dumps(
            {
                "requests": served,
                "requests_per_s": round(served / wall),
                "cpu_ms_per_request": round(1000 * cpu / served, 4),
                "model_thread_busy_ms_per_request": round(1000 * stats["model_busy_s"] / served, 4),
                "calls_by_size": stats["calls_by_size"],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
