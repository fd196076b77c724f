"""Comments and docstrings cite the project's own docs (docs/…md#heading). Every such citation
must lead somewhere a maintainer with only this repository can follow: the file exists and, when
an anchor is given, a heading of that file has that anchor. Citations of documents that live
outside the repository ("SPEC §x", "ARCHITECTURE §x") are refused."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE_SUFFIXES = (".py", ".cc", ".h", ".cu", ".cpp", ".txt", ".cmake", ".sh", ".md", ".toml")
CITATION = re.compile(r"\bdocs/((?:[\w-]+/)*[\w-]+\.md)(?:#([\w-]+))?")
OUTSIDE = re.compile(r"\b(?:SPEC|ARCHITECTURE) ?§")


def _tracked_sources() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"needs a git checkout to list the tracked files: {e}")
    return [ROOT / p for p in out.splitlines() if p.endswith(SOURCE_SUFFIXES) and p != "benchmarks/RESULTS.md"]


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


def test_no_citation_of_documents_outside_the_repository():
    found = []
    for source in _tracked_sources():
        for line_no, line in enumerate(source.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line) and source.name != Path(__file__).name:
                found.append(f"{source.relative_to(ROOT)}:{line_no}: {line.strip()}")
    assert not found, "cite docs/ instead:\n" + "\n".join(found)
