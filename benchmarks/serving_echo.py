"""The floor of the HTTP -> Dynamo -> worker path for benchmarks/serving_gpu.py: a Dynamo worker
whose function returns a fixed embedding of the served model's width at once (no torch call, no
batcher), registered beside the model's workers. Its rows measure what the frontend, the request
plane and the worker's Python take per request with no model in the way: the part of a served
request's latency no batching can remove, and the most requests/s one worker process reaches.

    python benchmarks/serving_echo.py --model-name embedding-echo --component echo --dim 768

`--inline` answers on the event loop with a response built once, skipping what a plain callable's
worker does per request (reading the request's input, the hop to its function's thread, packing
the output): what is left is Dynamo's own cost per request, the most one worker process can serve.

It logs `started worker 0 (echo): pid N` (the line serving_launch.worker_pids reads) before it
serves, and serves until SIGTERM, as `python -m aitune.dynamo worker` does."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, AsyncGenerator

from aitune.dynamo import DynamoWorkerConfig, dynamo_worker
from aitune.dynamo.packing import pack_embeddings
from aitune.dynamo.worker import FunctionWorker, _configure_logging


class InlineEchoWorker(FunctionWorker):
    """The echo with nothing of aitune's per-request work: one prebuilt response per request."""

    def __init__(self, row: list[float], config: DynamoWorkerConfig) -> None:
        super().__init__(lambda _input: [row], config)
        self._response = pack_embeddings([row], config.served_name)

    def request_view(self, request: Any) -> Any:
        return request  # not read

    async def serve(self, request: Any) -> AsyncGenerator[Any, None]:
        self.served += 1
        yield self._response


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-name", required=True)
    parser.add_argument("--component", default="echo")
    parser.add_argument("--dim", type=int, required=True, help="the width of the returned embedding")
    parser.add_argument("--inline", action="store_true", help="answer on the event loop, no per-request work")
    args = parser.parse_args(argv)
    row = [0.0] * args.dim

    def echo(_input: object) -> list[list[float]]:
        return [row]

    config = DynamoWorkerConfig(
        type="embedding", model_path=args.model_name, model_name=args.model_name, component=args.component
    )
    print(f"started worker 0 (echo): pid {os.getpid()}", file=sys.stderr, flush=True)
    if args.inline:
        config.validate()
        _configure_logging(f"{config.served_name} pid {os.getpid()}")  # the tag worker_stats reads
        InlineEchoWorker(row, config).run(enable_nats=config.enable_nats)
    else:
        dynamo_worker(echo, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
