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


# -- seeds (made in the parent) ------------------------------------------------------------------
def make_seeds(folder: Path, aot: bool) -> list[dict[str, Any]]:
    import logging

    import torch

    import aitune.torch as ait
    from aitune.torch.backend import TorchEagerBackend, TorchInductorAotBackend
    from aitune.torch.config import config

    config.cache_dir = folder / "seed-cache"
    logging.getLogger("aitune").setLevel(logging.WARNING)

    def strategy(b):
        return ait.OneBackendStrategy(b).enable_performance_validation(False).enable_find_max_batch_size(False)

    seeds = []

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
    m = ait.Module(mlp, "mlp", strategy=strategy(TorchEagerBackend()))
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
    seeds.append({"name": "eager-mlp", "path": str(ait.save(m, folder / "eager-mlp.ait")), "model": "mlp"})

    m2 = ait.Module(KwargsNet().eval(), "kw", strategy=strategy(TorchEagerBackend()))
    ait.tune(
        lambda x: m2(x, scale=2.0, extra={"bias": torch.ones(3)}),
        [torch.randn(6) for _ in range(2)],
        batch_sizes=[1, 2],
        device="cpu",
    )
    seeds.append({"name": "eager-kwargs", "path": str(ait.save(m2, folder / "eager-kwargs.ait")), "model": "kwargs"})

    from own_state_backend import OwnStateBackend

    m4 = ait.Module(_mlp(), "own", strategy=strategy(OwnStateBackend()))
    ait.tune(m4, [torch.randn(6) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    seeds.append({"name": "own-state", "path": str(ait.save(m4, folder / "own-state.ait")), "model": "mlp"})
    seeds.append({"name": "state-dict", "path": str(make_state_dict_seed(folder)), "model": "state_dict"})

    if aot:
        # A model of its own: after an AOT tune the wrapped model's weights go to
        # config.device_after_tuning ('meta'), which would leave the eager seed's model empty.
        torch.manual_seed(0)
        aot_mlp = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
        m3 = ait.Module(aot_mlp, "aot", strategy=strategy(TorchInductorAotBackend()))
        ait.tune(m3, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
        seeds.append({"name": "aot-mlp", "path": str(ait.save(m3, folder / "aot-mlp.ait")), "model": "mlp"})
    return seeds


def _mlp() -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def make_state_dict_seed(folder: Path) -> Path:
    """A LocalTorchStorage state dict: tensors, an artifact file and folder, a plain path."""
    import torch

    from aitune.torch.checkpoint.artifact import ArtifactPath
    from aitune.torch.checkpoint.storage import LocalTorchStorage

    build = folder / "state-build"
    (build / "engine").mkdir(parents=True)
    (build / "engine" / "model.plan").write_bytes(b"plan bytes")
    (build / "profiles").mkdir()
    (build / "profiles" / "a.json").write_text('{"min": [1, 6]}')
    state = {
        "weight": torch.arange(6.0),
        "engine": ArtifactPath(build, "engine/model.plan"),
        "profiles": ArtifactPath(build, "profiles"),
        "built_in": Path("/opt/elsewhere"),
        "options": {"depth": 3, "scale": (1.5, torch.ones(2))},
    }
    return LocalTorchStorage(folder, sha_type="512").save("state-dict", state)


def make_outside_files(folder: Path) -> dict[str, str]:
    """Real files outside every archive, for the path attacks: a TorchScript program (code that
    serves other outputs), a safetensors file and a folder holding both under the names the seeds use."""
    import torch
    from safetensors.torch import save_file

    outside = folder / "outside"
    (outside / "program").mkdir(parents=True)

    class Evil(torch.nn.Module):
        def forward(self, x):
            return torch.full((x.shape[0], 3), 42.0)

    torch.jit.save(torch.jit.script(Evil()), str(outside / "program" / "model.ts"))
    save_file({"0": torch.tensor([1000.0])}, str(outside / "state.safetensors"))
    (outside / "engine").mkdir()
    (outside / "engine" / "model.plan").write_bytes(b"outside plan")
    return {"folder": str(outside), "tensors": str(outside / "state.safetensors")}


class KwargsNet:  # defined lazily below (torch is imported only where needed)
    pass


def _define_models() -> None:
    import torch

    class _KwargsNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(6, 3)

        def forward(self, x, scale: float = 1.0, extra=None):
            y = self.linear(x) * scale + extra["bias"]
            return {"y": y, "norm": (y.norm(dim=-1),)}

    global KwargsNet
    KwargsNet = _KwargsNet  # type: ignore[misc]


def model_and_call(kind: str, seed_state: Path | None = None) -> tuple[Any, Any]:
    """A fresh target module for a seed and the call that exercises it."""
    import torch

    _define_models()
    torch.manual_seed(0)
    if kind == "state_dict":
        return None, None
    if kind == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
        x = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
        return model, lambda m: m(x)
    model = KwargsNet().eval()
    x = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
    return model, lambda m: m(x, scale=2.0, extra={"bias": torch.ones(3)})


# -- mutation (in the parent) -------------------------------------------------------------------
INTERESTING = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2**31,
    -(2**63),
    2**64,
    1e308,
    float("nan"),
    "",
    "..",
    "../../etc/passwd",
    "/abs/path",
    "a/b",
    "__class__",
    "x" * 300,
    "\u202e\u0000",
    [],
    {},
    [[[]]],
    {"tuple": ["a", 1]},
    "float32",
    "cuda:0",
    "cuda:9",
    "meta",
    "fp16",
    "torch",
]


def _nodes(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _nodes(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _nodes(v, path + (i,))
    return out


def _get(value: Any, path: tuple) -> Any:
    for p in path:
        value = value[p]
    return value


def mutate_manifest(manifest: dict, rng: random.Random, edits: list[str]) -> str:
    """1-3 edits of the manifest (as text: some edits are not JSON values, e.g. deep nesting),
    each described in `edits`."""
    if rng.random() < 0.03:  # nesting deep enough to overflow a recursive parser's stack
        edits.append("a null replaced by 50,000 nested lists")
        return json.dumps(manifest).replace("null", "[" * 50000 + "]" * 50000, 1)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        paths = [p for p in _nodes(manifest) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent, key = _get(manifest, path[:-1]), path[-1]
        before = json.dumps(parent[key])[:60]
        op = rng.random()
        if op < 0.5:
            parent[key] = rng.choice(INTERESTING)
        elif op < 0.65 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.75 and isinstance(parent, list):
            parent.insert(key, parent[key])
        elif op < 0.85 and isinstance(parent, list):
            parent.pop(key)
        elif op < 0.92:
            parent[key] = _nested(rng.choice([63, 65, 200]))
        elif isinstance(parent[key], int) and not isinstance(parent[key], bool):
            parent[key] += rng.choice([-1, 1, 2**32, -(2**32)])
        elif isinstance(parent[key], str):
            parent[key] += rng.choice(["/..", "x", "\n", '"', ".0"])
        after = (
            json.dumps(parent[key])[:60]
            if isinstance(parent, dict) and key in parent or isinstance(parent, list) and key < len(parent)
            else "(removed)"
        )
        edits.append(f"{'.'.join(map(str, path))}: {before} -> {after}")
    return json.dumps(manifest, allow_nan=True)


def _nested(depth: int) -> list:
    out: list = []
    for _ in range(depth - 1):
        out = [out]
    return out


def damage(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    op = rng.randrange(6)
    if op == 0:  # bit flips
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(buf))
            buf[at] ^= 1 << rng.randrange(8)
    elif op == 1:  # an overwritten range
        at = rng.randrange(len(buf))
        for i in range(at, min(len(buf), at + rng.randint(1, 64))):
            buf[i] = rng.randrange(256)
    elif op == 2:  # truncation
        del buf[rng.randrange(len(buf)) :]
    elif op == 3:  # garbage appended
        buf += bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))
    elif op == 4:  # a chunk duplicated
        at = rng.randrange(len(buf))
        buf[at:at] = buf[at : at + rng.randint(1, 200)]
    else:  # zeroed range
        at = rng.randrange(len(buf))
        buf[at : at + rng.randint(1, 512)] = bytes(min(len(buf) - at, rng.randint(1, 512)))
    return bytes(buf)


# Fields that name files: each is resolved against the extraction folder, so each is attacked.
PATH_KEYS = ("folder", "relative_path", "state_tensors", "entry", "path")
RESERVED = (".complete", ".stamps", ".complete.tmp-1-0", "modules/0/graphs/0/backend/model.pt2.probed--1")


def path_attacks(outside: dict[str, str]) -> list[str]:
    """Values for a field that names a file: outside the archive (absolute, or climbing out of
    the extraction folder <cache>/checkpoints/<digest>/ to the fuzzer's outside folder), inside
    it but elsewhere, reserved, or malformed."""
    climb = "../../../outside"
    return [
        outside["folder"],
        outside["folder"] + "/program",
        outside["tensors"],
        "/etc/passwd",
        "/etc",
        climb,
        climb + "/program",
        climb + "/state.safetensors",
        "modules/0/graphs/0/backend/0/" + climb,
        "state/0/../../../../outside",
        "modules/0/graphs/0/samples/0.json",
        "modules/0/weights.safetensors",
        "state/state.safetensors",
        ".",
        "",
        "a//b",
        "C:/x",
        "x\\..\\..\\y",
        *RESERVED,
    ]


def attack_paths(manifest: dict, rng: random.Random, edits: list[str], outside: dict[str, str]) -> str:
    """1-2 fields that name files set to `path_attacks` values (the records are left as they are)."""
    targets = []
    for node in _nodes(manifest):
        if not node:
            continue
        parent, key = _get(manifest, node[:-1]), node[-1]
        if isinstance(parent, dict) and key in PATH_KEYS and isinstance(parent[key], str):
            targets.append(node)
        elif len(node) >= 2 and node[-2] == "artifacts" and isinstance(parent, dict):
            targets.append(node)
    attacks = path_attacks(outside)
    for node in rng.sample(targets, min(len(targets), rng.choice([1, 1, 2]))):
        parent, key = _get(manifest, node[:-1]), node[-1]
        before = json.dumps(parent[key])[:60]
        parent[key] = rng.choice(attacks)
        edits.append(f"{'.'.join(map(str, node))}: {before} -> {json.dumps(parent[key])[:80]}")
    if "sha512" in manifest and isinstance(manifest["sha512"], dict) and manifest["sha512"] and rng.random() < 0.2:
        name = rng.choice(sorted(manifest["sha512"]))
        manifest["sha512"][rng.choice(attacks)] = manifest["sha512"].pop(name)
        edits.append(f"sha512: the digest of {name} moved to another name")
    return json.dumps(manifest)


def make_mutant(seed: dict, index: int, base_seed: int, folder: Path, outside: dict[str, str]) -> dict[str, Any]:
    from checkpoint_tools import read_archive, write_archive

    rng = random.Random(f"{base_seed}:{index}")
    path = folder / f"mutant-{index}.ait"
    raw = Path(seed["path"]).read_bytes()
    kind = "damage" if rng.random() < 0.45 else "crafted"
    edits: list[str] = []
    if kind == "damage":
        path.write_bytes(damage(raw, rng))
    else:
        manifest, members = read_archive(Path(seed["path"]))
        choice = rng.random()
        if choice < 0.3:
            write_archive(path, attack_paths(manifest, rng, edits, outside), members, fix_records=False)
        elif choice < 0.8 or not members:
            write_archive(path, mutate_manifest(manifest, rng, edits), members, fix_records=False)
        elif choice < 0.85:  # a member under a reserved name, listed with its true record
            name = rng.choice(RESERVED)
            members[name] = b"x"
            edits.append(f"member {name} added")
            write_archive(path, manifest, members)
        else:  # a member replaced, records fixed: a well-formed archive with other content
            name = rng.choice(sorted(members))
            if name.endswith("model.pt2"):  # native code with valid hashes is trusted (docs: threat model)
                name = next((m for m in sorted(members) if not m.endswith("model.pt2")), name)
            members[name] = damage(members[name], rng) if members[name] else b"x"
            edits.append(f"member {name} replaced")
            write_archive(path, manifest, members)
    return {
        "index": index,
        "kind": kind,
        "seed": seed["name"],
        "path": str(path),
        "model": seed["model"],
        "edits": edits,
    }


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


def _is_outside(tensor: Any) -> bool:
    """The marker value of make_outside_files' safetensors file."""
    return tensor.numel() == 1 and float(tensor.reshape(-1)[0]) == 1000.0


def _state_summary(state: Any) -> Any:
    """A comparable form of a loaded state dict: tensors as lists, artifacts by their content."""
    import torch

    from aitune.torch.checkpoint.artifact import ArtifactPath

    if isinstance(state, torch.Tensor):
        return ["tensor", str(state.dtype), state.tolist()]
    if isinstance(state, ArtifactPath):
        path = state.path
        if path.is_dir():
            return [
                "folder",
                sorted((str(p.relative_to(path)), p.read_bytes().hex()) for p in path.rglob("*") if p.is_file()),
            ]
        return ["file", str(state.relative_path), path.read_bytes().hex()]
    if isinstance(state, dict):
        return {str(k): _state_summary(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return [type(state).__name__, [_state_summary(v) for v in state]]
    return repr(state)


def _state_escapes(state: Any, cache: Path) -> list[Path]:
    """Every ArtifactPath in a loaded state dict outside the extraction folder, and tensors of the
    outside file (reported as paths)."""
    import torch

    from aitune.torch.checkpoint.artifact import ArtifactPath

    root = (cache / "checkpoints").resolve()
    found: list[Path] = []
    if isinstance(state, ArtifactPath):
        if root not in state.path.resolve().parents:
            found.append(state.path)
    elif isinstance(state, torch.Tensor):
        if _is_outside(state):
            found.append(Path("(a tensor of the outside file)"))
    elif isinstance(state, dict):
        for v in state.values():
            found += _state_escapes(v, cache)
    elif isinstance(state, (list, tuple)):
        for v in state:
            found += _state_escapes(v, cache)
    return found


def _flat(out: Any) -> list:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


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
