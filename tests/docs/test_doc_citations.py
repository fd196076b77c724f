"""Comments, docstrings and docs cite the project's own files. Every such citation must lead
somewhere a maintainer with only this repository can follow:

* docs/…md#heading: the file exists and, when an anchor is given, a heading has that anchor;
* a repository path (tests/…, python/…, cpp/…, tools/…, benchmarks/…, docs/…; `x.{h,cc}` names
  both files) names a file or folder that exists;
* in docs/ and python/, a path inside the package (`tune_data/recorder.py`, `backend/common/…`)
  names a file of python/aitune/torch or python/aitune.

History is exempt (CHANGELOG.md, benchmarks/RESULTS.md), and so are the files that cite another
repository (FOREIGN) and the output folders in OUTPUT_FOLDERS. Citations of documents that live outside the repository ("SPEC §x",
"ARCHITECTURE §x") are refused."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE_SUFFIXES = (".py", ".cc", ".h", ".cu", ".cpp", ".txt", ".cmake", ".sh", ".md", ".toml")
CITATION = re.compile(r"\bdocs/((?:[\w-]+/)*[\w-]+\.md)(?:#([\w-]+))?")
OUTSIDE = re.compile(r"\b(?:SPEC|ARCHITECTURE) ?§")
HISTORY = ("CHANGELOG.md", "benchmarks/RESULTS.md")
# Files whose paths are another repository's: the census of AITune's paths cites AITune's pages.
FOREIGN = {"tests/compat/aitune_paths.py": "its sources are pages of AITune's repository (ai-dynamo/aitune)"}
# A path starting at one of the repository's top folders, optionally ending in `.{a,b}`.
REPO_PATH = re.compile(r"(?<![\w./$<{-])((?:tests|python|cpp|tools|benchmarks|docs)/[\w./-]*[\w/])(\.\{[\w,]+\})?")
# Folders that a command writes into, so they need not exist in a checkout.
OUTPUT_FOLDERS = {"benchmarks/results/": "./run bench writes the micro-benchmark results there"}


def _tracked_sources() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"needs a git checkout to list the tracked files: {e}")
    return [
        ROOT / p
        for p in out.splitlines()
        if (p.endswith(SOURCE_SUFFIXES) or p == "run") and p not in HISTORY and p not in FOREIGN
    ]


def _package_path_pattern() -> re.Pattern:
    """`sub/…/name.py` where `sub` is a folder of python/aitune/torch or python/aitune."""
    package = ROOT / "python" / "aitune"
    folders = {d.name for base in (package, package / "torch") for d in base.iterdir() if d.is_dir()}
    folders.discard("__pycache__")
    return re.compile(rf"(?<![\w./-])((?:{'|'.join(sorted(folders))})/(?:[\w-]+/)*[\w-]+\.py)\b")


def _cited_paths(line: str) -> list[str]:
    paths = []
    for m in REPO_PATH.finditer(line):
        if line[m.end() : m.end() + 1] in ("*", "<", "{", "$"):  # a glob or a placeholder
            continue
        path = m.group(1).rstrip(".")
        if m.group(2):  # manifest.{h,cc}
            paths += [f"{path}.{suffix}" for suffix in m.group(2)[2:-1].split(",")]
        elif "*" not in path:
            paths.append(path)
    return paths


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    in_code = False
    anchors = set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            anchors.add(github_anchor(line.lstrip("#")))
    return anchors


def test_github_anchor_rule():
    assert github_anchor("Numeric comparison") == "numeric-comparison"
    assert github_anchor("Binding, flattening and names") == "binding-flattening-and-names"
    assert github_anchor("`aitune run` and the C++ runtime") == "aitune-run-and-the-c-runtime"


def test_every_docs_citation_resolves():
    broken = []
    anchors: dict[Path, set[str]] = {}
    for source in _tracked_sources():
        text = source.read_text(encoding="utf-8", errors="replace")
        for line_no, line in enumerate(text.splitlines(), 1):
            for m in CITATION.finditer(line):
                doc = ROOT / "docs" / m.group(1)
                where = f"{source.relative_to(ROOT)}:{line_no}: docs/{m.group(1)}"
                if not doc.is_file():
                    broken.append(f"{where} (no such file)")
                    continue
                if m.group(2) and m.group(2) not in anchors.setdefault(doc, _anchors(doc)):
                    broken.append(f"{where}#{m.group(2)} (no such heading)")
    assert not broken, "citations that lead nowhere:\n" + "\n".join(broken)


def test_every_repository_path_cited_exists():
    broken = []
    for source in _tracked_sources():
        for line_no, line in enumerate(source.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for path in _cited_paths(line):
                if path in OUTPUT_FOLDERS or (ROOT / path).exists():
                    continue
                broken.append(f"{source.relative_to(ROOT)}:{line_no}: {path}")
    assert not broken, "repository paths that do not exist:\n" + "\n".join(broken)


def test_every_package_path_cited_in_docs_and_code_exists():
    pattern = _package_path_pattern()
    package = ROOT / "python" / "aitune"
    broken = []
    for source in _tracked_sources():
        if source.relative_to(ROOT).parts[0] not in ("docs", "python"):
            continue
        for line_no, line in enumerate(source.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in pattern.finditer(line):
                if not any((base / m.group(1)).is_file() for base in (package, package / "torch")):
                    broken.append(f"{source.relative_to(ROOT)}:{line_no}: {m.group(1)}")
    assert not broken, "package paths that do not exist:\n" + "\n".join(broken)


def test_path_rules():
    assert _cited_paths("see `cpp/core/checkpoint/manifest.{h,cc}` and tests/unit/test_layering.py.") == [
        "cpp/core/checkpoint/manifest.h",
        "cpp/core/checkpoint/manifest.cc",
        "tests/unit/test_layering.py",
    ]
    assert _cited_paths("glob tests/unit/*.py, $ROOT/tests/x, ../tests/y") == []
    assert _package_path_pattern().search("(`tune_data/recorder.py`)").group(1) == "tune_data/recorder.py"


def test_no_citation_of_documents_outside_the_repository():
    found = []
    for source in _tracked_sources():
        for line_no, line in enumerate(source.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line) and source.name != Path(__file__).name:
                found.append(f"{source.relative_to(ROOT)}:{line_no}: {line.strip()}")
    assert not found, "cite docs/ instead:\n" + "\n".join(found)
