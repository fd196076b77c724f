"""What the engine link (aitune/dynamo/engine_link.py) adds to one batch: the same tuned embedder's
batch call in this process (ModuleEngine.run_batch) and through an engine process
(RemoteEngine.run_batch: the items to bytes, the Unix socket both ways, the rows back to lists).

    python benchmarks/engine_link_overhead.py --device cpu --batch-sizes 1,8,32
    python benchmarks/engine_link_overhead.py --device cuda:0 --size full --dtype float16

The model is serving_models.py's embedder (`--size tiny` or `full`, BERT-base sized), tuned with the
eager backend (the link's cost does not depend on the backend) at the given batch sizes and saved;
the engine is `python -m aitune.dynamo engine` on the same device. Prints one JSON line per batch
size: p50 ms of each path over `--calls` calls and the difference."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import serving_models  # noqa: E402
from defaults import host_median_ms  # noqa: E402 - the same median of host times as defaults.py's CPU rows


def main() -> None:
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", choices=["tiny", "full"], default="tiny")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-sizes", type=ints, default=[1, 8, 32])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    os.environ.update(SERVING_MODELS_SIZE=args.size, SERVING_MODELS_DTYPE=args.dtype)

    import aitune.torch as ait
    from aitune.dynamo.engine_link import RemoteEngine
    from aitune.dynamo.module_engine import ModuleEngine
    from aitune.torch.backend import TorchEagerBackend

    work = Path(tempfile.mkdtemp(prefix="aitune-link-"))
    model = serving_models.make_embedding().to(args.device)
    wrapped = ait.Module(model, "embedder", strategy=ait.OneBackendStrategy(TorchEagerBackend()))
    samples = serving_models.item_samples("embedding", max(args.batch_sizes))
    ait.tune(wrapped, samples, batch_sizes=args.batch_sizes, device=args.device)
    checkpoint = work / "e.ait"
    ait.save(wrapped, checkpoint)
    local = ModuleEngine(wrapped)

    key = secrets.token_hex(16)
    socket_path = work / "engine.sock"
    env = dict(os.environ, AITUNE_ENGINE_AUTHKEY=key, PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]))
    if args.device == "cpu":  # one torch thread, as this process: idle OpenMP threads waking per op cost ~1 ms
        env["OMP_NUM_THREADS"] = "1"
    command = [sys.executable, "-m", "aitune.dynamo", "engine", "--model", "serving_models:make_embedding"]
    command += ["--checkpoint", str(checkpoint), "--device", args.device, "--socket", str(socket_path)]
    engine = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        remote = RemoteEngine(str(socket_path), key.encode(), connect_timeout_s=300)
        ids = serving_models.item_samples("embedding", 1, seed=7)[0].tolist()
        for bs in args.batch_sizes:
            keyed = [local.item(ids, i) for i in range(bs)]
            batch = [item for _, item in keyed]
            here = round(host_median_ms(lambda: local.run_batch(keyed[0][0], batch, bs), args.calls), 4)
            there = round(host_median_ms(lambda: remote.run_batch(keyed[0][0], batch, bs), args.calls), 4)
            print(
                json.dumps(
                    {
                        "device": args.device,
                        "size": args.size,
                        "batch": bs,
                        "in_process_p50_ms": here,
                        "engine_p50_ms": there,
                        "link_ms": round(there - here, 4),
                    }
                ),
                flush=True,
            )
        remote.close()
    finally:
        engine.terminate()
        engine.wait(timeout=30)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
