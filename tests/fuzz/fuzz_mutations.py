"""The checkpoint fuzzer's mutations (tests/fuzz/checkpoint_fuzz.py, docs/fuzzing.md): bytes
damaged, manifests edited, the fields that name files attacked, members replaced or added."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any


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
        # Copies, never the shared objects themselves: an INTERESTING list placed in the manifest
        # and then edited in place (an element set to the list itself) made a cycle json.dumps
        # refused, and edited the table for every later mutant, so `--only N` replayed another
        # mutant than the run had made (seed 217608022, mutant 2000-2500, 2026-12-07).
        if op < 0.5:
            parent[key] = copy.deepcopy(rng.choice(INTERESTING))
        elif op < 0.65 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.75 and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
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
