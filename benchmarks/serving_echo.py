"""The floor of the HTTP -> Dynamo -> worker path for benchmarks/serving_gpu.py: a Dynamo worker
whose function returns a fixed embedding of the served model's width at once (no torch call, no
batcher), registered beside the model's workers. Its rows measure what the frontend, the request
plane and the worker's Python take per request with no model in the way: the part of a served
request's latency no batching can remove, and the most requests/s one worker process reaches.

    python benchmarks/serving_echo.py --model-name embedding-echo --component echo --dim 768

It logs `started worker 0 (echo): pid N` (the line serving_launch.worker_pids reads) before it
serves, and serves until SIGTERM, as `python -m aitune.dynamo worker` does."""

from __future__ import annotations

import argparse
import os
import sys

from aitune.dynamo import DynamoWorkerConfig, dynamo_worker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-name", required=True)
    parser.add_argument("--component", default="echo")
    parser.add_argument("--dim", type=int, required=True, help="the width of the returned embedding")
    args = parser.parse_args(argv)
    row = [0.0] * args.dim

    def echo(_input: object) -> list[list[float]]:
        return [row]

    config = DynamoWorkerConfig(
        type="embedding", model_path=args.model_name, model_name=args.model_name, component=args.component
    )
    print(f"started worker 0 (echo): pid {os.getpid()}", file=sys.stderr, flush=True)
    dynamo_worker(echo, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
