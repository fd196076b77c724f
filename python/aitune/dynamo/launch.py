"""`python -m aitune.dynamo`: one worker, or N workers on N devices behind one frontend
(docs/serving.md, "Several GPUs").

    python -m aitune.dynamo worker --model my_pkg.models:make_model --checkpoint model.ait --device cuda:1
    python -m aitune.dynamo serve  --model my_pkg.models:make_model --checkpoint model.ait \
        --devices cuda:0,cuda:1 --frontend --http-port 8000

Each worker builds the model with the factory, loads the same .ait checkpoint with a device_map
that puts every tuned module on its device, and serves it with dynamo_worker(). `serve` starts
the workers (and with --frontend, Dynamo's OpenAI frontend) as child processes on one host with
file-based discovery and the TCP request plane, and supervises them: when one exits, or on
SIGTERM/SIGINT, all are stopped, so nothing is left running."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from aitune.dynamo.config import ENGINE_AUTHKEY_ENV, WORKER_TYPES, DynamoWorkerConfig

STOP_GRACE_S = 15.0  # after SIGTERM, how long a child may take to drain before SIGKILL
ENGINE_NAME = "engine"  # how serve names an engine process among its children (they stop last)


def _common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        required=True,
        metavar="MODULE:FACTORY",
        help="a function returning the (untuned) torch model the checkpoint was saved from",
    )
    parser.add_argument("--checkpoint", required=True, help="the .ait checkpoint (ait.save) to serve")
    parser.add_argument("--type", default="embedding", choices=WORKER_TYPES)
    parser.add_argument("--model-name", default=None, help="the name clients send (default: the checkpoint path)")
    parser.add_argument("--namespace", default="aitune")
    parser.add_argument("--component", default="backend")
    parser.add_argument("--endpoint", default="generate")
    parser.add_argument(
        "--max-wait-ms", type=float, default=2.0, help="the batcher's longest wait for a fuller batch (0: batching off)"
    )
    parser.add_argument(
        "--token-id-limit",
        type=int,
        default=None,
        metavar="N",
        help="refuse (HTTP 400) token ids outside [0, N) (default: the model's embedding table where it is known; "
        "0: no check)",
    )


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m aitune.dynamo", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="serve the checkpoint on one device")
    _common_arguments(worker)
    worker.add_argument("--device", default="cuda:0")
    worker.add_argument(
        "--engine-socket",
        default=None,
        metavar="PATH",
        help="send the batches to the engine process at this Unix socket instead of loading the model here "
        f"(the link's secret in ${ENGINE_AUTHKEY_ENV})",
    )
    engine = commands.add_parser("engine", help="run the checkpoint on one device for the workers that connect")
    _common_arguments(engine)
    engine.add_argument("--device", default="cuda:0")
    engine.add_argument("--socket", required=True, metavar="PATH", help="the Unix socket the workers connect to")
    serve = commands.add_parser("serve", help="one worker per device, optionally behind a frontend")
    _common_arguments(serve)
    serve.add_argument(
        "--devices", required=True, help="comma-separated, one worker each: cuda:0,cuda:1 (cpu,cpu works)"
    )
    serve.add_argument(
        "--fronts",
        type=int,
        default=0,
        metavar="K",
        help="per device, one engine process runs the model and K workers feed it (docs/serving.md, "
        '"An engine process per device"); 0 (default): each worker runs the model itself',
    )
    serve.add_argument("--frontend", action="store_true", help="also start Dynamo's OpenAI frontend")
    serve.add_argument("--http-host", default="0.0.0.0")
    serve.add_argument("--http-port", type=int, default=8000)
    return parser.parse_args(argv)


def load_factory(spec: str) -> Callable[[], Any]:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"--model must be MODULE:FACTORY (e.g. my_pkg.models:make_model), got {spec!r}")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise SystemExit(f"--model {spec} is a {type(target).__name__}, not a function returning the model")
    return target


def load_on_device(factory: Callable[[], Any], checkpoint: str, device: str) -> Any:
    """The factory's model with the checkpoint's tuned modules on `device`."""
    import aitune.torch as ait
    from aitune.torch.checkpoint.load import OpenedCheckpoint

    names = [entry.name for entry in OpenedCheckpoint(Path(checkpoint), "fast").manifest.modules]
    model = factory()
    if hasattr(model, "eval"):
        model.eval()
    if hasattr(model, "to") and not any(p.device.type == "meta" for p in model.parameters()):
        model.to(device)  # JIT and eager backends serve the module's own weights
    return ait.load(model, checkpoint, device_map={name: device for name in names})


def worker_main(args: argparse.Namespace) -> int:
    from aitune.dynamo.worker import dynamo_worker

    if args.engine_socket:
        from aitune.dynamo.engine_link import RemoteEngine, authkey_from_env

        served: Any = RemoteEngine(args.engine_socket, authkey_from_env())
    else:
        served = load_on_device(load_factory(args.model), args.checkpoint, args.device)
    config = DynamoWorkerConfig(
        type=args.type,
        model_path=args.checkpoint,
        model_name=args.model_name,
        namespace=args.namespace,
        component=args.component,
        endpoint=args.endpoint,
        max_wait_ms=args.max_wait_ms,
        token_id_limit=args.token_id_limit,
    )
    dynamo_worker(served, config)
    return 0


def engine_main(args: argparse.Namespace) -> int:
    from aitune.dynamo.engine_link import EngineServer, authkey_from_env
    from aitune.dynamo.module_engine import ModuleEngine
    from aitune.dynamo.worker import _configure_logging

    authkey = authkey_from_env()  # before the model loads: a missing secret fails at once
    _configure_logging(f"engine {args.device} pid {os.getpid()}")
    served = load_on_device(load_factory(args.model), args.checkpoint, args.device)
    EngineServer(ModuleEngine(served, args.token_id_limit), args.socket, authkey).serve_forever()
    return 0


def _worker_command(args: argparse.Namespace, device: str, engine_socket: str | None = None) -> list[str]:
    return _child_command(args, "worker", device) + (["--engine-socket", engine_socket] if engine_socket else [])


def _engine_command(args: argparse.Namespace, device: str, socket_path: str) -> list[str]:
    return _child_command(args, "engine", device) + ["--socket", socket_path]


def _child_command(args: argparse.Namespace, kind: str, device: str) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "aitune.dynamo",
        kind,
        "--model",
        args.model,
        "--checkpoint",
        args.checkpoint,
        "--type",
        args.type,
        "--namespace",
        args.namespace,
        "--component",
        args.component,
        "--endpoint",
        args.endpoint,
        "--max-wait-ms",
        str(args.max_wait_ms),
        "--device",
        device,
    ]
    if args.model_name:
        command += ["--model-name", args.model_name]
    if args.token_id_limit is not None:
        command += ["--token-id-limit", str(args.token_id_limit)]
    return command


def frontend_command(host: str, port: int, namespace: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "dynamo.frontend",
        "--discovery-backend",
        "file",
        "--request-plane",
        "tcp",
        "--http-host",
        host,
        "--http-port",
        str(port),
        "--namespace",
        namespace,
    ]


def serve_main(args: argparse.Namespace) -> int:
    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    if not devices:
        raise SystemExit(f"--devices needs at least one device, got {args.devices!r}")
    if args.fronts < 0:
        raise SystemExit(
            f"--fronts must be 0 (each worker runs the model) or the workers per engine, got {args.fronts}"
        )
    env = dict(os.environ)
    env.setdefault("DYN_DISCOVERY_BACKEND", "file")
    env.setdefault("DYN_REQUEST_PLANE", "tcp")
    if args.fronts:  # a fresh secret for the engine link, its sockets in a folder only this user can enter
        env[ENGINE_AUTHKEY_ENV] = secrets.token_hex(32)
    with tempfile.TemporaryDirectory(prefix="aitune-engines-") if args.fronts else contextlib.nullcontext() as folder:
        commands = []
        for i, device in enumerate(devices):
            if not args.fronts:
                commands.append((f"worker {i} ({device})", _worker_command(args, device)))
                continue
            socket_path = str(Path(folder) / f"engine-{i}.sock")
            commands.append((f"{ENGINE_NAME} {i} ({device})", _engine_command(args, device, socket_path)))
            commands += [
                (f"worker {i}.{k} ({device})", _worker_command(args, device, socket_path)) for k in range(args.fronts)
            ]
        if args.frontend:
            commands.insert(0, ("frontend", frontend_command(args.http_host, args.http_port, args.namespace)))
        return supervise(commands, env)


def supervise(commands: list[tuple[str, list[str]]], env: dict[str, str]) -> int:
    """Runs the children until one exits or a signal arrives, then stops them all."""
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append("SIGTERM"))
    signal.signal(signal.SIGINT, lambda *_: stopping.append("SIGINT"))
    children: list[tuple[str, subprocess.Popen]] = []
    try:
        for name, command in commands:
            children.append((name, subprocess.Popen(command, env=env)))
            print(f"[aitune.dynamo serve] started {name}: pid {children[-1][1].pid}", flush=True)
        while not stopping:
            for name, child in children:
                code = child.poll()
                if code is not None:
                    print(f"[aitune.dynamo serve] {name} exited with code {code}; stopping the others", flush=True)
                    return code or 1
            time.sleep(0.2)
        print(f"[aitune.dynamo serve] {stopping[0]}: stopping {len(children)} processes", flush=True)
        return 0
    finally:
        stop(children)


def stop(children: list[tuple[str, subprocess.Popen]]) -> None:
    """SIGTERM to every child, engines last: a worker's requests in flight may finish after the
    signal (docs/serving.md, "Stopping"), and with --fronts they need the engine until then."""
    engines = [(name, child) for name, child in children if name.startswith(ENGINE_NAME)]
    _stop_group([(name, child) for name, child in children if not name.startswith(ENGINE_NAME)])
    _stop_group(engines)


def _stop_group(children: list[tuple[str, subprocess.Popen]]) -> None:
    for _, child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for name, child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"[aitune.dynamo serve] {name} did not stop within {STOP_GRACE_S:g} s; killing it", flush=True)
            child.kill()
            child.wait()


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.command == "engine":
        return engine_main(args)
    return worker_main(args) if args.command == "worker" else serve_main(args)
