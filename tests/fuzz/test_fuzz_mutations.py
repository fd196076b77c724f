"""The checkpoint fuzzer's manifest edits (tests/fuzz/fuzz_mutations.py) are pure functions of the
seed: they never share the INTERESTING table's objects with a manifest, so no edit can make a
cycle or change what later mutants get (`--only N` replays the run's mutant N)."""

from __future__ import annotations

import copy
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_mutations  # noqa: E402 - beside this file, as checkpoint_fuzz.py imports it

MANIFEST = {
    "format": 2,
    "modules": [{"name": "m", "graphs": [{"name": "0", "samples": ["s0"], "backend": {"kind": "eager"}}]}],
    "files": [{"path": "a", "size": 1}, {"path": "b", "size": 2}],
}


def test_edits_never_share_the_interesting_values():
    table = copy.deepcopy(fuzz_mutations.INTERESTING)
    for seed in range(3000):
        manifest = copy.deepcopy(MANIFEST)
        edits: list[str] = []
        text = fuzz_mutations.mutate_manifest(manifest, random.Random(seed), edits)
        assert edits, seed
        if "nested lists" not in edits[0]:
            json.loads(text)  # a cycle would have failed in json.dumps already
    # nan != nan, so compare the JSON text (nan as NaN) of the table before and after.
    assert json.dumps(fuzz_mutations.INTERESTING, allow_nan=True) == json.dumps(table, allow_nan=True)


def test_the_same_seed_gives_the_same_edits_whatever_ran_before():
    first: list[str] = []
    fuzz_mutations.mutate_manifest(copy.deepcopy(MANIFEST), random.Random(11), first)
    for seed in range(500):  # other mutants in between
        fuzz_mutations.mutate_manifest(copy.deepcopy(MANIFEST), random.Random(seed), [])
    again: list[str] = []
    fuzz_mutations.mutate_manifest(copy.deepcopy(MANIFEST), random.Random(11), again)
    assert again == first
