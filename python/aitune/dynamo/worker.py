"""Dynamo workers (docs/serving.md): `dynamo_worker(fn, config)` serves a tuned ait.Module or
any callable at the Dynamo endpoint `namespace.component.endpoint`, registered as an OpenAI
embedding, image or video model; `DynamoWorker` is the class to subclass for full control.

Discovery and the request plane come from Dynamo's own variables, DYN_DISCOVERY_BACKEND and
DYN_REQUEST_PLANE; unset, a worker uses file-based discovery and the TCP request plane, which
need neither etcd nor NATS (one host; start the frontend with `--discovery-backend file`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, AsyncGenerator, Callable

from aitune.dynamo.batching import DynamicBatcher
from aitune.dynamo.config import DynamoWorkerConfig
from aitune.dynamo.module_engine import ItemRules, ModuleEngine, item_shapes
from aitune.dynamo.packing import embedding_vectors, pack_embeddings, pack_images, pack_videos
from aitune.dynamo.requests import BadRequest, Request, call_input, embedding_options, token_sequences
from aitune.dynamo.runtime import import_dynamo, model_type
from aitune.exceptions import InvalidTypeError, InvalidValueError

if TYPE_CHECKING:
    from aitune.dynamo.engine_link import RemoteEngine

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


# A worker stops within STOP_DEADLINE_S of SIGTERM or SIGINT, whatever it serves: Dynamo's runtime
# is shut down at once (in-flight requests may finish), and if the process has not ended after
# STOP_GRACE_S it ends there (a model call cannot be interrupted; its thread would hold the exit).
STOP_DEADLINE_S = 5.0
STOP_GRACE_S = 3.0


class _Stopper:
    """The worker's SIGTERM/SIGINT handling: the first signal shuts the runtime down and arms the
    grace timer; a second one, or the timer, ends the process.

    A Python-level handler (signal.signal), not the loop's (add_signal_handler): the loop may be
    busy in a model call of its own (a lone request runs on the loop's thread, batching.py), and
    the loop's handlers run only when it gets back to them. Python runs this one in the main
    thread as soon as the running bytecode or an interruptible wait lets it, and the timer then
    ends the process whatever the loop is doing."""

    def __init__(self, runtime: Any, in_flight: Callable[[], int]) -> None:
        self._runtime = runtime
        self._in_flight = in_flight
        self._signalled = False

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        self(signal.Signals(signum).name)

    def __call__(self, signame: str) -> None:
        if self._signalled:
            self._end_now(f"{signame} again")
            return
        self._signalled = True
        logger.info("%s: stopping (%d request(s) in flight)", signame, self._in_flight())
        timer = threading.Timer(STOP_GRACE_S, self._end_now, args=(f"{STOP_GRACE_S:g} s after the signal",))
        timer.daemon = True
        timer.start()
        # At once, not through the loop: shutting the runtime down deregisters the endpoint, which
        # must happen even if the loop does not get back before the timer ends the process.
        self._runtime.shutdown()

    def _end_now(self, why: str) -> None:
        logger.warning("Worker stopped %s with %d request(s) unfinished", why, self._in_flight())
        for handler in logger.handlers + logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0)


class DynamoWorker:
    """Subclass, override `setup` and `serve`, then call `run`. `setup` runs once before the
    endpoint is served; `serve` yields the response chunks of one request (raise BadRequest
    for a request it cannot serve: the client gets HTTP 400 with the message); `on_ready` runs
    once the endpoint is being served (register the model there). As in AITune, the base's
    `setup` and `serve` raise NotImplementedError when called."""

    namespace = "aitune"
    component = "backend"
    endpoint_name = "generate"

    def setup(self) -> None:
        raise NotImplementedError(f"{type(self).__name__}.setup() is not implemented: override it to load the model")

    async def serve(self, request: Any) -> AsyncGenerator[Any, None]:
        """An async generator of the response chunks of one request."""
        raise NotImplementedError(
            f"{type(self).__name__}.serve() is not implemented: override it as an async generator of responses"
        )
        yield  # an async generator, as the subclasses' serve

    async def on_ready(self, runtime: Any, endpoint: Any) -> None:
        pass

    async def on_shutdown(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        """Counters logged as one JSON line, `Stats: {...}`, on SIGUSR1 and at shutdown; {} logs
        nothing."""
        return {}

    def request_view(self, request: Any) -> Any:
        """The request as `serve` gets it: a dict as a `Request`, whose fields also read as
        attributes (`request.input`); anything else as it came."""
        return Request(request) if isinstance(request, dict) else request

    def log_stats(self) -> None:
        stats = self.stats()
        if stats:
            logger.info("Stats: %s", json.dumps(stats, sort_keys=True))

    def run(self, enable_nats: bool = False) -> None:
        """Serves until SIGTERM or SIGINT, then returns (within STOP_DEADLINE_S of the signal)."""
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
        in_flight = [0]
        _Stopper(runtime, lambda: in_flight[0]).install()
        loop.add_signal_handler(signal.SIGUSR1, self.log_stats)  # counters on demand (docs/serving.md, "Stats")
        endpoint = runtime.endpoint(f"{self.namespace}.{self.component}.{self.endpoint_name}")
        invalid_argument = dynamo.InvalidArgument

        async def handle(request: Any, context: Any = None) -> AsyncGenerator[Any, None]:
            in_flight[0] += 1
            try:
                async for chunk in self.serve(self.request_view(request)):
                    yield chunk
            except BadRequest as e:
                raise invalid_argument(str(e)) from e
            except Exception:
                logger.exception("A request failed in the served function")
                raise
            finally:
                in_flight[0] -= 1

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
        self.engine: ModuleEngine | RemoteEngine | None = None
        self.batcher: DynamicBatcher | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.served = 0
        self.rejected = 0
        self.failed = 0

    def setup(self) -> None:
        engine: ModuleEngine | RemoteEngine | None = None
        if isinstance(self.fn, ItemRules):  # an engine process runs the module (engine_link.RemoteEngine)
            engine, where = self.fn, f"through the engine process at {getattr(self.fn, 'address', '?')}"  # type: ignore[assignment]
        elif self.config.type == "embedding" and self.config.mapping is None and item_shapes(self.fn):
            engine, where = ModuleEngine(self.fn, self.config.token_id_limit), "in this process"
        if engine is not None:
            self.engine = engine
            self.batcher = DynamicBatcher(engine.run_batch, engine.sizes_for, self.config.max_wait_ms / 1000)
            graphs = "; ".join(f"{s.describe()} at batch sizes {s.batch_sizes}" for s in engine.shapes)
            logger.info("Serving the tuned module's graphs through the batcher, %s: %s", where, graphs)
            # Once, at startup: an id beyond the embedding table would, on CUDA, break the process.
            logger.info("Request check: %s", engine.token_ids.describe())
        else:
            if self.config.token_id_limit:
                logger.warning(
                    "token_id_limit=%d is not checked: it applies to a tuned module's token ids read by the worker "
                    "(type='embedding', no mapping); this worker passes requests to the function",
                    self.config.token_id_limit,
                )
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
        self.log_stats()
        if self._executor is not None:  # a call still running ends with the process (_Stopper)
            self._executor.shutdown(wait=False, cancel_futures=True)
        logger.info(
            "Worker stopped: served %d requests (%d rejected as bad requests, %d failed)",
            self.served,
            self.rejected,
            self.failed,
        )

    def stats(self) -> dict[str, Any]:
        """Requests served, rejected and failed, and the batcher's counts (tuned modules): read
        twice, the difference is what ran in between; `at` is time.monotonic(), a clock all
        processes of the host share."""
        stats: dict[str, Any] = {
            "at": round(time.monotonic(), 6),
            "served": self.served,
            "rejected": self.rejected,
            "failed": self.failed,
        }
        if self.batcher is not None and self.engine is not None:
            stats.update(
                self.batcher.stats(), tuned_batch_sizes=sorted({n for s in self.engine.shapes for n in s.batch_sizes})
            )
        return stats

    def request_view(self, request: Any) -> Any:
        """A tuned module's worker reads the request's fields itself: the dict as it came (a copy
        into `Request` cost ~13 ms for an image's 150k pixel values); a callable gets a `Request`."""
        return request if self.engine is not None else super().request_view(request)

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
                self.engine.check_request_size(len(sequences))
                keyed = [self.engine.item(ids, i) for i, ids in enumerate(sequences)]
                rows = await self.batcher.submit(keyed)  # type: ignore[union-attr]
                return pack_embeddings(
                    rows,
                    model,
                    encoding,
                    dimensions,
                    prompt_tokens=sum(key[1][0] for key, _ in keyed),  # values per item, raw bytes too
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


def _needs_mapping(fn: Callable, config: DynamoWorkerConfig) -> bool:
    """A torch module needs `mapping` unless it is a tuned ait.Module served as embeddings through
    the batcher (AITune requires it for every torch module)."""
    torch = sys.modules.get("torch")  # a module cannot be a torch module if torch was never imported
    if torch is None or not isinstance(fn, torch.nn.Module) or config.mapping is not None:
        return False
    return not (config.type == "embedding" and item_shapes(fn))


def dynamo_worker(fn: Callable, config: DynamoWorkerConfig) -> None:
    """Serves `fn` as a Dynamo worker until SIGTERM or SIGINT. `fn` is a tuned ait.Module (its
    graphs run through the batcher at their tuned batch sizes) or any callable (called once per
    request with the request's input, see DynamoWorkerConfig.mapping). Every configuration
    error is raised here, before the Dynamo runtime starts."""
    if not isinstance(config, DynamoWorkerConfig):
        raise InvalidTypeError(f"dynamo_worker needs a DynamoWorkerConfig, got a {type(config).__name__}")
    config.validate()  # again: the fields may have changed since the config was made
    if isinstance(fn, ItemRules) and config.type != "embedding":
        raise InvalidValueError(
            f"dynamo_worker of an engine process serves type='embedding' (token ids in, rows out), got {config.type!r}"
        )
    if not callable(fn) and not isinstance(fn, ItemRules):
        raise InvalidTypeError(f"dynamo_worker serves a callable (e.g. a tuned ait.Module), got a {type(fn).__name__}")
    if _needs_mapping(fn, config):
        raise InvalidValueError(
            f"dynamo_worker of the torch module {type(fn).__name__}: a mapping function is required "
            "(DynamoWorkerConfig.mapping=fn(request) -> dict of forward arguments); only a tuned ait.Module "
            f"served as type='embedding' reads token ids by itself, and this one is type={config.type!r}"
            f"{'' if config.type != 'embedding' else ' with no batched single-tensor graph'}"
        )
    device = getattr(fn, "device", None)
    _configure_logging(f"{config.served_name}{f' {device}' if device is not None else ''} pid {os.getpid()}")
    FunctionWorker(fn, config).run(enable_nats=config.enable_nats)
