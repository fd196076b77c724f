"""A seeded, time-boxed mutation fuzzer for checkpoints: Python's ait.load and the C++ CLI
(docs/guide.md "Threat model"; issue 17).

    python tests/fuzz/checkpoint_fuzz.py --seed 7 --mutants 10000          # a local run
    python tests/fuzz/checkpoint_fuzz.py --seed 7 --seconds 120            # CI (./run test)

Seeds are valid checkpoints made at start (an eager MLP; a module with kwargs, a constant and a
dict output; a custom backend with its own to_dict()/from_dict() state naming an artifact file, an
artifact folder, tensors and a plain path; a LocalTorchStorage state dict with the same; optionally,
with --aot, an AOTInductor package). Each mutant is one of:

- damage: bytes of the file flipped, overwritten, truncated, extended or duplicated. Every byte
  that matters is covered by the manifest's CRC-32 or an entry's SHA-256, so a damaged file must
  be refused -- or, if the damage hit bytes nothing reads, load and serve the same outputs;
- crafted: the manifest edited (values replaced by other types, out-of-range numbers, path-like
  strings, deep nesting; keys deleted; list items dropped or duplicated) or a member replaced, and
  the archive re-packed with correct hashes, as a careful editor would. A crafted file is a valid
  archive that says something else: it must be refused with a documented error or load, and
  never crash, hang, escape or import. A third of the crafted edits aim at the fields that name
  files (artifact folders and relative paths, state tensors, artifacts, file records, digests),
  with absolute paths to real files outside the archive, `..` climbs and reserved names.

Loads run in a worker process (a crash ends the worker, not the fuzzer: the mutant is recorded and
a new worker starts) with a per-mutant deadline (a hang). Failures: a crash, a hang, an exception
outside aitune's documented errors, or a damaged file that loads and serves different outputs
(a silent wrong load), or an escape: a load that hands a backend's from_dict, or returns from
LocalTorchStorage.load, a path outside the extraction folder. Every --cli-every-th mutant also goes through `aitune inspect` and
`aitune run`: no signal, and an exit code from the documented table. Exit status 1 when anything
failed; the report (--out) lists every failure with its seed and index, so `--only INDEX`
replays one.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "helpers"))  # checkpoint_tools

DOCUMENTED_VALUE_ERRORS = (
    "Some modules in the device_map were not found",
    "Some modules in the state_dict were not found",
)
CLI_EXIT_CODES = {0, 2, 3, 4, 5, 6, 7}  # 1 (runtime error) is allowed when no C++ backtrace is printed

from fuzz_mutations import make_mutant  # noqa: E402 - beside this file (sys.path[0] when run as a script)
from fuzz_seeds import (  # noqa: E402
    _define_models,
    _flat,
    _is_outside,
    _state_escapes,
    _state_summary,
    make_outside_files,
    make_seeds,
    model_and_call,
)


# -- the worker (one process, many loads) ---------------------------------------------------------
def worker() -> None:
    import logging

    import torch

    import aitune.torch as ait
    from aitune import exceptions as errors
    from aitune.torch import module_registry
    from aitune.torch.config import config

    logging.getLogger("aitune").setLevel(logging.ERROR)
    from own_state_backend import OwnStateBackend  # registers the seed's custom backend

    from aitune.torch.checkpoint.storage import LocalTorchStorage

    def load(path: str, kind: str) -> tuple[Any, Any]:
        """(what the load returned, the outputs or state summary to compare)."""
        if kind == "state_dict":
            return LocalTorchStorage(Path(path).parent).load(path), None
        model, call = model_and_call(kind)
        loaded = ait.load(model, path)
        return loaded, call

    references: dict[str, Any] = {}
    for line in sys.stdin:
        job = json.loads(line)
        if "reference" in job:  # {"reference": seed name, "path", "model"}: the original's outputs
            loaded, call = load(job["path"], job["model"])
            with torch.no_grad():
                references[job["reference"]] = _state_summary(loaded) if call is None else _flat(call(loaded))
            module_registry.clear()
            print(json.dumps({"ok": True}), flush=True)
            continue
        config.cache_dir = job["cache"]
        result: dict[str, Any] = {"index": job["index"]}
        OwnStateBackend.restored_paths.clear()
        OwnStateBackend.restored_tensors.clear()
        try:
            loaded, call = load(job["path"], job["model"])
        except errors.AITuneError as e:
            result.update(outcome="refused", type=type(e).__name__, message=str(e)[:300])
        except ValueError as e:
            documented = str(e).startswith(DOCUMENTED_VALUE_ERRORS)
            result.update(
                outcome="refused" if documented else "undocumented", type=type(e).__name__, message=str(e)[:300]
            )
        except RuntimeError as e:
            documented = str(e).startswith("Cannot rebuild")
            result.update(
                outcome="refused" if documented else "undocumented", type=type(e).__name__, message=str(e)[:300]
            )
        except Exception as e:  # noqa: BLE001 - the finding
            result.update(outcome="undocumented", type=type(e).__name__, message=str(e)[:300])
        else:
            if job["model"] == "state_dict":
                OwnStateBackend.restored_paths.extend(_state_escapes(loaded, Path(job["cache"])))
                try:
                    result.update(outcome="loaded", same_output=_state_summary(loaded) == references[job["seed"]])
                except Exception as e:  # noqa: BLE001 - a state whose artifacts cannot be read
                    result.update(outcome="loaded_broken", type=type(e).__name__, message=str(e)[:300])
            else:
                try:
                    with torch.no_grad():
                        out = _flat(call(loaded))
                    ref = references[job["seed"]]
                    same = len(out) == len(ref) and all(
                        a.shape == b.shape and torch.equal(a, b) for a, b in zip(out, ref)
                    )
                    result.update(outcome="loaded", same_output=same)
                except errors.AITuneError as e:
                    result.update(outcome="loaded_refuses_calls", type=type(e).__name__, message=str(e)[:300])
                except Exception as e:  # noqa: BLE001 - a load that serves broken calls
                    result.update(outcome="loaded_broken", type=type(e).__name__, message=str(e)[:300])
        # An escape whatever the outcome: a path outside the extraction folder (or a tensor read
        # from the fuzzer's outside file) reached a backend's from_dict or the caller.
        root = (Path(job["cache"]) / "checkpoints").resolve()
        outside = [str(p) for p in OwnStateBackend.restored_paths if root not in Path(p).resolve().parents]
        outside += ["a tensor of the outside file" for t in OwnStateBackend.restored_tensors if _is_outside(t)]
        if outside:
            result["escaped"] = outside[:3]
        module_registry.clear()
        print(json.dumps(result), flush=True)


class Worker:
    def __init__(self, seeds: list[dict[str, Any]]) -> None:
        self.seeds = seeds
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        for s in self.seeds:
            self.send({"reference": s["name"], "path": s["path"], "model": s["model"]}, timeout=600)

    def send(self, job: dict[str, Any], timeout: float) -> dict[str, Any] | str:
        """The worker's answer, or "crash" / "hang"."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc and self.proc.stdin and self.proc.stdout
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._dead()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return "hang"
        line = self.proc.stdout.readline()
        if not line:
            return self._dead()
        return json.loads(line)

    def _dead(self) -> str:
        assert self.proc
        code = self.proc.wait()
        self.proc = None
        return f"crash (exit {code})"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=60)


def run_cli(mutant: dict[str, Any], cache: Path) -> list[str]:
    """Problems of `aitune inspect` and `aitune run` on the mutant (empty: fine)."""
    cli = shutil.which("aitune")
    if cli is None:
        return []
    problems = []
    for args in (["inspect", mutant["path"]], ["run", mutant["path"], "--device", "cpu"]):
        try:
            r = subprocess.run(
                [cli, *args],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=120,
                env=dict(os.environ, AITUNE_CACHE_DIR=str(cache)),
            )
        except subprocess.TimeoutExpired:
            problems.append(f"`aitune {args[0]}` hangs")
            continue
        if (
            r.returncode < 0
            or (r.returncode not in CLI_EXIT_CODES and "Exception raised from" in r.stderr)
            or r.returncode > 7
        ):
            problems.append(f"`aitune {args[0]}` exit {r.returncode}: {r.stderr.strip()[-300:]}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mutants", type=int, default=0, help="stop after this many (0: no limit)")
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long (0: no limit)")
    parser.add_argument("--aot", action="store_true", help="add an AOTInductor seed (slow: compiles on the CPU)")
    parser.add_argument("--cli-every", type=int, default=25, help="every Nth mutant also through the CLI (0: never)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per load before it counts as a hang")
    parser.add_argument("--only", type=int, help="replay one mutant index")
    parser.add_argument("--out", help="JSON report")
    parser.add_argument(
        "--write-seeds",
        metavar="DIR",
        help="write the seed checkpoints to DIR/archives and their manifests to DIR/manifests "
        "(libFuzzer seed corpora, docs/fuzzing.md) and exit",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return 0
    if not args.mutants and not args.seconds and args.only is None and not args.write_seeds:
        parser.error("give --mutants, --seconds, --only or --write-seeds")
    folder = Path(tempfile.mkdtemp(prefix="aitune-ckpt-fuzz-"))
    try:
        if args.write_seeds:
            return write_seed_corpora(Path(args.write_seeds), folder)
        return fuzz(args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_seed_corpora(out: Path, folder: Path) -> int:
    import zipfile

    _define_models()
    (out / "archives").mkdir(parents=True, exist_ok=True)
    (out / "manifests").mkdir(parents=True, exist_ok=True)
    for seed in make_seeds(folder, aot=False):
        shutil.copy(seed["path"], out / "archives" / f"{seed['name']}.ait")
        (out / "manifests" / f"{seed['name']}.json").write_bytes(zipfile.ZipFile(seed["path"]).read("manifest.json"))
    return 0


def fuzz(args: argparse.Namespace, folder: Path) -> int:
    os.environ.setdefault("AITUNE_PROGRESS", "0")
    _define_models()
    seeds = make_seeds(folder, args.aot)
    outside = make_outside_files(folder)
    worker_ = Worker(seeds)
    counts: dict[str, int] = {}
    failures: list[dict[str, Any]] = []
    start = time.monotonic()
    index, done = -1, 0
    crafted_different: list[dict[str, Any]] = []
    for index in [args.only] if args.only is not None else itertools.count():
        if args.only is None and (
            (args.mutants and index >= args.mutants) or (args.seconds and time.monotonic() - start > args.seconds)
        ):
            break
        # AOT mutants are a few in a hundred: each new archive digest re-extracts and re-probes.
        weights = [1.0 if not s["name"].startswith("aot") else 0.03 for s in seeds]
        seed = random.Random(f"{args.seed}:{index}:seed").choices(seeds, weights)[0]
        mutant = make_mutant(seed, index, args.seed, folder, outside)
        cache = folder / f"cache-{index % 4}"  # a few caches, reused: extractions are shared like a user's
        answer = worker_.send({**mutant, "cache": str(cache)}, args.timeout)
        outcome = answer if isinstance(answer, str) else answer["outcome"]
        failed = None
        if isinstance(answer, str):
            failed = answer
        elif answer.get("escaped"):
            failed = f"escape: {answer['escaped']} reached the loader ({outcome})"
        elif outcome == "undocumented":
            failed = f"undocumented {answer['type']}: {answer['message']}"
        elif mutant["kind"] == "damage" and outcome == "loaded" and not answer["same_output"]:
            failed = "silent wrong load (a damaged file served different outputs)"
        elif mutant["kind"] == "damage" and outcome in ("loaded_broken", "loaded_refuses_calls"):
            failed = f"a damaged file loaded and then failed calls ({answer.get('type')})"
        key = f"{mutant['kind']}:{outcome if isinstance(answer, str) else outcome}"
        if not isinstance(answer, str) and outcome == "loaded":
            key += ":same" if answer["same_output"] else ":different"
            if mutant["kind"] == "crafted" and not answer["same_output"] and len(crafted_different) < 50:
                crafted_different.append({"index": index, "seed": mutant["seed"], "edits": mutant["edits"]})
        counts[key] = counts.get(key, 0) + 1
        done += 1
        if args.cli_every and index % args.cli_every == 0:
            for problem in run_cli(mutant, folder / "cli-cache"):
                failures.append({**mutant, "problem": problem})
        if failed:
            failures.append({**mutant, "problem": failed})
            keep = folder.parent / f"aitune-fuzz-failure-{args.seed}-{index}.ait"
            shutil.copy(mutant["path"], keep)
            failures[-1]["kept"] = str(keep)
        Path(mutant["path"]).unlink(missing_ok=True)
        if done % 500 == 0:
            print(
                f"[{time.monotonic() - start:6.0f} s] {done} mutants, {len(failures)} failures",
                file=sys.stderr,
                flush=True,
            )
    worker_.stop()
    report = {
        "seed": args.seed,
        "mutants": done,
        "seconds": round(time.monotonic() - start, 1),
        "outcomes": dict(sorted(counts.items())),
        "failures": failures,
        "crafted_loaded_different": crafted_different,
    }
    print(json.dumps({k: v for k, v in report.items() if k not in ("failures", "crafted_loaded_different")}, indent=1))
    for f in failures:
        print(
            f"FAILURE seed {args.seed} index {f['index']} ({f['kind']} of {f['seed']}): {f['problem']} "
            f"[kept {f.get('kept', '-')}]"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
