"""Every module and name of AITune 0.6's census (aitune_paths.py) imports from aitune, and every
path of one AITune object gives one aitune object; the deliberate differences are really missing
(docs/guide.md, "Coming from AITune").

The imports run in a child interpreter: some AITune paths act when imported
(`aitune.torch.jit.enable` turns JIT tuning on), which must not leak into this test process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

from aitune_paths import CENSUS, DIFFERENCES, difference

PROBE = textwrap.dedent(
    """
    import importlib, json, sys
    rows = json.loads(sys.stdin.read())
    out = []
    for module, name in rows:
        try:
            mod = importlib.import_module(module)
        except Exception as e:
            out.append([module, name, f"import failed: {type(e).__name__}: {e}", None])
            continue
        if not name:
            out.append([module, name, "ok", id(mod)])
        elif hasattr(mod, name):
            out.append([module, name, "ok", id(getattr(mod, name))])
        else:
            out.append([module, name, f"{module} has no {name}", None])
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> dict[tuple[str, str], tuple[str, int | None]]:
    rows = [[module, name] for module, name, _, _ in CENSUS]
    cwd = tmp_path_factory.mktemp("census")  # JIT inspection writes its page into the working folder
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        input=json.dumps(rows),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        env={"AITUNE_JIT_CACHE_DIR": str(Path(cwd) / "jit"), **_child_env()},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {(m, n): (status, ident) for m, n, status, ident in json.loads(result.stdout.splitlines()[-1])}


def _child_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "AUTOWRAPT_BOOTSTRAP"}


def test_census_is_the_generated_table_of_aitune_material():
    assert len(CENSUS) > 200 and len(set((m, n) for m, n, _, _ in CENSUS)) == len(CENSUS)
    modules = {m for m, _, _, _ in CENSUS}
    for path in ("aitune.torch", "aitune.torch.backend", "aitune.dynamo", "aitune.torch.task.profiling"):
        assert path in modules


def test_every_census_path_imports_unless_it_is_a_listed_difference(probed):
    failures = [
        f"{module}{'.' + name if name else ''}: {status}"
        for (module, name), (status, _) in probed.items()
        if status != "ok" and difference(module, name) is None
    ]
    assert not failures, "AITune paths aitune lacks (provide them, or list them in DIFFERENCES):\n" + "\n".join(
        failures
    )


def test_every_listed_difference_is_really_missing(probed):
    stale = [
        f"{module}.{name}"
        for (module, name), (status, _) in probed.items()
        if status == "ok" and difference(module, name) is not None
    ]
    assert not stale, "DIFFERENCES entries that import now (remove them): " + ", ".join(stale)
    rows = {(m, n) for m, n, _, _ in CENSUS}
    orphans = [key for key in DIFFERENCES if key not in rows and not any(m == key[0] for m, _ in rows)]
    assert not orphans, f"DIFFERENCES entries for paths the census does not have: {orphans}"


def test_paths_of_one_aitune_object_give_one_aitune_object(probed):
    by_origin: dict[str, set[int]] = defaultdict(set)
    paths: dict[str, list[str]] = defaultdict(list)
    for module, name, origin, _ in CENSUS:
        status, ident = probed[(module, name)]
        if name and status == "ok" and not origin.startswith("("):
            by_origin[origin].add(ident)
            paths[origin].append(f"{module}.{name}")
    split = {origin: paths[origin] for origin, idents in by_origin.items() if len(idents) > 1}
    assert not split, f"one AITune object, several aitune objects: {split}"


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("aitune.torch.dynamic_shapes", ("BatchDim", "DynamicDim")),
        ("aitune.torch.module.graph_spec", ("GraphSpec",)),
        ("aitune.torch.module.locator", ("Locator",)),
    ],
)
def test_paths_lost_in_the_graph_model_move_import_again(module, names):
    """Issue 28: the move to aitune/torch/graph/ had removed these three AITune paths."""
    import importlib

    import aitune.torch as ait
    from aitune.torch.graph import graph_spec, locator

    mod = importlib.import_module(module)
    for name in names:
        assert (
            getattr(mod, name)
            is {
                "BatchDim": ait.BatchDim,
                "DynamicDim": ait.DynamicDim,
                "GraphSpec": graph_spec.GraphSpec,
                "Locator": locator.Locator,
            }[name]
        )
