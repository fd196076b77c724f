"""Dynamo workers (docs/serving.md): `dynamo_worker(fn, config)` serves a tuned ait.Module or
any callable at the Dynamo endpoint `namespace.component.endpoint`, registered as an OpenAI
embedding, image or video model; `DynamoWorker` is the class to subclass for full control.

Discovery and the request plane come from Dynamo's own variables, DYN_DISCOVERY_BACKEND and
DYN_REQUEST_PLANE; unset, a worker uses file-based discovery and the TCP request plane, which
need neither etcd nor NATS (one host; start the frontend with `--discovery-backend file`)."""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import logging
import os
import signal
import sys
from typing import Any, AsyncGenerator, Callable

from aitune.dynamo.batching import DynamicBatcher
from aitune.dynamo.config import DynamoWorkerConfig
from aitune.dynamo.module_engine import ModuleEngine, item_shapes
from aitune.dynamo.packing import embedding_vectors, pack_embeddings, pack_images, pack_videos
from aitune.dynamo.requests import BadRequest, call_input, embedding_options, token_sequences
from aitune.dynamo.runtime import import_dynamo, model_type
from aitune.exceptions import AITuneUserInputError

logger = logging.getLogger("aitune.dynamo")


def _configure_logging(tag: str) -> None:
    """The worker's own lines on stderr, tagged, unless the program configured logging."""
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"[aitune.dynamo {tag}] %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


class DynamoWorker(abc.ABC):
    """Subclass, override `setup` and `serve`, then call `run`. `setup` runs once before the
    endpoint is served; `serve` yields the response chunks of one request (raise BadRequest
    for a request it cannot serve: the client gets HTTP 400 with the message); `on_ready` runs
    once the endpoint is being served (register the model there)."""

    namespace = "aitune"
    component = "backend"
    endpoint_name = "generate"

    def setup(self) -> None:
        pass

    @abc.abstractmethod
    def serve(self, request: Any) -> AsyncGenerator[Any, None]:
        """An async generator of the response chunks of one request."""

    async def on_ready(self, runtime: Any, endpoint: Any) -> None:
        pass

    async def on_shutdown(self) -> None:
        pass

    def run(self, enable_nats: bool = False) -> None:
        """Serves until SIGTERM or SIGINT, then returns."""
        dynamo = import_dynamo()  # before setup: a missing package fails before any model loads
        try:
            import uvloop

            uvloop.run(self._main(dynamo, enable_nats))
        except ImportError:
            asyncio.run(self._main(dynamo, enable_nats))

    async def _main(self, dynamo: Any, enable_nats: bool) -> None:
        self.setup()
        loop = asyncio.get_running_loop()
        discovery = os.environ.get("DYN_DISCOVERY_BACKEND", "file")
        request_plane = os.environ.get("DYN_REQUEST_PLANE", "tcp")
        extra = {"event_plane": "nats"} if enable_nats else {}
        runtime = dynamo.DistributedRuntime(loop, discovery, request_plane, **extra)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, runtime.shutdown)
        endpoint = runtime.endpoint(f"{self.namespace}.{self.component}.{self.endpoint_name}")
        invalid_argument = dynamo.InvalidArgument

        async def handle(request: Any, context: Any = None) -> AsyncGenerator[Any, None]:
            try:
                async for chunk in self.serve(request):
                    yield chunk
            except BadRequest as e:
                raise invalid_argument(str(e)) from e
            except Exception:
                logger.exception("A request failed in the served function")
                raise

        try:
            await asyncio.gather(endpoint.serve_endpoint(handle), self.on_ready(runtime, endpoint))
        finally:
            await self.on_shutdown()


class FunctionWorker(DynamoWorker):
    """The worker behind dynamo_worker(): a tuned module's graphs through the batcher, or a
    callable per request, with the response packed per modality."""

    def __init__(self, fn: Callable, config: DynamoWorkerConfig) -> None:
        self.fn = fn
        self.config = config
        self.namespace, self.component, self.endpoint_name = config.namespace, config.component, config.endpoint
        self.engine: ModuleEngine | None = None
        self.batcher: DynamicBatcher | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.served = 0
        self.rejected = 0
        self.failed = 0

    def setup(self) -> None:
        if self.config.type == "embedding" and self.config.mapping is None and item_shapes(self.fn):
            self.engine = ModuleEngine(self.fn)
            self.batcher = DynamicBatcher(self.engine.run_batch, self.engine.sizes_for, self.config.max_wait_ms / 1000)
            graphs = "; ".join(f"{s.describe()} at batch sizes {s.batch_sizes}" for s in self.engine.shapes)
            logger.info("Serving the tuned module's graphs through the batcher: %s", graphs)
        else:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="aitune-fn")

    async def on_ready(self, runtime: Any, endpoint: Any) -> None:
        dynamo = import_dynamo()
        await dynamo.register_model(
            dynamo.ModelInput.Text,
            model_type(dynamo, self.config.type),
            endpoint,
            self.config.model_path,
            self.config.served_name,
            worker_type=dynamo.WorkerType.Aggregated,
            skip_model_assets=True,
        )
        logger.info(
            "✅ Worker ready: model '%s' (%s) at %s, pid %d",
            self.config.served_name,
            self.config.type,
            self.config.endpoint_path,
            os.getpid(),
        )

    async def on_shutdown(self) -> None:
        if self.batcher is not None:
            await self.batcher.close()
            logger.info("Batches run: %d for %d items", self.batcher.batches_run, self.batcher.items_run)
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        logger.info(
            "Worker stopped: served %d requests (%d rejected as bad requests, %d failed)",
            self.served,
            self.rejected,
            self.failed,
        )

    async def serve(self, request: Any) -> AsyncGenerator[Any, None]:
        try:
            if not isinstance(request, dict):
                raise BadRequest(f"a request must be a JSON object, got {type(request).__name__}")
            response = await self._respond(request)
        except BadRequest:
            self.rejected += 1
            raise
        except Exception:
            self.failed += 1
            raise
        self.served += 1
        yield response

    async def _respond(self, request: dict) -> dict:
        model = str(request.get("model") or self.config.served_name)
        kind = self.config.type
        if kind == "embedding":
            encoding, dimensions = embedding_options(request)
            if self.engine is not None:
                sequences = token_sequences(request)
                keyed = [self.engine.item(ids, i) for i, ids in enumerate(sequences)]
                rows = await self.batcher.submit(keyed)  # type: ignore[union-attr]
                return pack_embeddings(
                    [r.tolist() for r in rows],
                    model,
                    encoding,
                    dimensions,
                    prompt_tokens=sum(len(s) for s in sequences),
                )
            result = await self._call(request)
            if isinstance(result, dict):
                return result
            return pack_embeddings(embedding_vectors(result), model, encoding, dimensions)
        result = await self._call(request)
        if kind == "image":
            return pack_images(result, model)
        return pack_videos(result, model, str(request.get("output_format") or "mp4"))

    async def _call(self, request: dict) -> Any:
        args, kwargs = call_input(request, self.config)

        def call() -> Any:
            try:
                import torch
            except ImportError:  # a callable that needs no torch
                return self.fn(*args, **kwargs)
            with torch.no_grad():  # grad mode is per thread
                return self.fn(*args, **kwargs)

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)


def dynamo_worker(fn: Callable, config: DynamoWorkerConfig) -> None:
    """Serves `fn` as a Dynamo worker until SIGTERM or SIGINT. `fn` is a tuned ait.Module (its
    graphs run through the batcher at their tuned batch sizes) or any callable (called once per
    request with the request's input, see DynamoWorkerConfig.mapping)."""
    if not isinstance(config, DynamoWorkerConfig):
        raise AITuneUserInputError(f"dynamo_worker needs a DynamoWorkerConfig, got a {type(config).__name__}")
    if not callable(fn):
        raise AITuneUserInputError(
            f"dynamo_worker serves a callable (e.g. a tuned ait.Module), got a {type(fn).__name__}"
        )
    device = getattr(fn, "device", None)
    _configure_logging(f"{config.served_name}{f' {device}' if device is not None else ''} pid {os.getpid()}")
    FunctionWorker(fn, config).run(enable_nats=config.enable_nats)
