"""Closed-loop HTTP load for the serving benchmarks: `clients` keep-alive connections, each sending
the same POST again as soon as its response is read, for `warmup_s` then `seconds`; only requests
sent inside the measured window count.

The clients are asyncio connections with a minimal HTTP/1.1 reader, spread over a few client
processes (`python serving_load.py`, one per 16 clients, at most one per 4 CPUs), so the load
generator is not the bottleneck a pool of Python threads under one GIL becomes at thousands of
requests/s. The processes import no torch (they start in a fraction of a second) and get the
window as absolute time.monotonic() values, a clock all processes of the host share."""

from __future__ import annotations

import array
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

START_MARGIN_S = 0.5  # for the client processes to start and connect before the first request
CLIENTS_PER_PROCESS = 16


def run_load(
    port: int,
    path: str,
    body: bytes,
    clients: int,
    seconds: float,
    warmup_s: float,
    during: Callable[[float, float], object] | None = None,
) -> dict:
    """requests/s, p50/p99 latency (ms) and errors of `clients` closed-loop clients. `during`, if
    given, is called here with (measure_from, stop_at) while the clients run (to sample the device
    or read the workers' counters at the window's edges); what it returns is the result's "during"."""
    processes = min(max(1, (os.cpu_count() or 1) // 4), -(-clients // CLIENTS_PER_PROCESS))
    shares = [clients // processes + (i < clients % processes) for i in range(processes)]
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    work = Path(tempfile.mkdtemp(prefix="aitune-load-"))
    (work / "request").write_bytes(head + body)
    start = time.monotonic() + START_MARGIN_S
    measure_from, stop_at = start + warmup_s, start + warmup_s + seconds
    children = [
        subprocess.Popen(
            [sys.executable, __file__, str(port), str(work / "request"), str(n), repr(start), repr(measure_from)]
            + [repr(stop_at), str(work / f"latencies-{i}")],
            stdout=subprocess.PIPE,
        )
        for i, n in enumerate(shares)
    ]
    during_result = during(measure_from, stop_at) if during is not None else None
    latencies = array.array("d")
    errors, statuses = 0, {}
    for i, child in enumerate(children):
        out, _ = child.communicate(timeout=max(0.0, stop_at - time.monotonic()) + 120)
        if child.returncode != 0:
            raise RuntimeError(f"a client process exited with code {child.returncode}")
        summary = json.loads(out)
        latencies.frombytes((work / f"latencies-{i}").read_bytes())
        errors += summary["errors"]
        for status, n in summary["statuses"].items():
            statuses[status] = statuses.get(status, 0) + n
    ordered = sorted(latencies)
    count = len(ordered)
    result = {
        "requests_per_s": round(count / seconds, 1),
        "p50_ms": round(1000 * ordered[count // 2], 3) if count else None,
        "p99_ms": round(1000 * ordered[min(count - 1, int(0.99 * count))], 3) if count else None,
        "requests": count,
        "errors": errors,
        "statuses": dict(sorted(statuses.items())),
        "clients": clients,
        "client_processes": processes,
    }
    if during is not None:
        result["during"] = during_result
    return result


def _client_process(argv: list[str]) -> None:
    port, request, clients = int(argv[0]), Path(argv[1]).read_bytes(), int(argv[2])
    start, measure_from, stop_at = (float(v) for v in argv[3:6])
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    latencies, errors, statuses = run(_clients(port, request, clients, start, measure_from, stop_at))
    Path(argv[6]).write_bytes(latencies.tobytes())
    print(json.dumps({"errors": errors, "statuses": {str(k): v for k, v in statuses.items()}}))


async def _clients(
    port: int, request: bytes, clients: int, start: float, measure_from: float, stop_at: float
) -> tuple[array.array, int, dict[int, int]]:
    latencies = array.array("d")
    counts = {"errors": 0}
    statuses: dict[int, int] = {}

    async def client() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(max(0.0, start - time.monotonic()))
        try:
            while True:
                sent = time.monotonic()
                if sent >= stop_at:
                    break
                writer.write(request)
                try:
                    status = await _read_response(reader)
                except (ConnectionError, asyncio.IncompleteReadError, ValueError):
                    status = 0  # the server closed or answered garbage: count it, reconnect
                    writer.close()
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                done = time.monotonic()
                if sent >= measure_from:
                    statuses[status] = statuses.get(status, 0) + 1
                    if status == 200:
                        latencies.append(done - sent)
                    else:
                        counts["errors"] += 1
        finally:
            writer.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, counts["errors"], statuses


async def _read_response(reader: asyncio.StreamReader) -> int:
    """The status of one HTTP/1.1 response, its body read and dropped (Content-Length or chunked)."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("connection closed")
    status = int(status_line.split()[1])
    length, chunked = 0, False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            await reader.readexactly(size + 2)  # the chunk and its CRLF
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status


if __name__ == "__main__":  # one client process: PORT REQUEST_FILE CLIENTS START MEASURE_FROM STOP_AT OUT
    _client_process(sys.argv[1:])
