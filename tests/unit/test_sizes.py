"""The size budget (docs/design.md#style): no source file over 600 lines, no function over
120 lines (Python and C++), and `Backend` with 30 methods or fewer.

What is measured: the git-tracked files under python/, cpp/, benchmarks/ and tools/ that are
source (not documentation, data or tests). Python functions are read with `ast`; C++ functions
with the small brace scanner below. So the test needs neither torch nor the native extension.

`ALLOWED` names the offenders that are tolerated for now. It may only shrink: an offender that is
not listed fails, and so does a listed entry that is no longer over its limit, so the list is
pruned as soon as a split lands."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "python" / "aitune").is_dir() and (p / "cpp").is_dir())

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120
MAX_BACKEND_METHODS = 30

FOLDERS = ("python", "cpp", "benchmarks", "tools")
SOURCE_SUFFIXES = (".py", ".cc", ".h", ".cpp", ".hpp", ".sh", ".cmake")
CPP_SUFFIXES = (".cc", ".h", ".cpp", ".hpp")

# Offenders tolerated for now, as "path" (a file), "path::function" or BACKEND_ENTRY. Keep it empty.
BACKEND_ENTRY = "python/aitune/torch/backend/backend.py::Backend (methods)"
ALLOWED: set[str] = set()


def _is_test(path: str) -> bool:
    name = Path(path).name
    parts = Path(path).parts
    return (
        bool(re.search(r"(_test|_fuzz|_benchmark)\.(cc|h|cpp)$", name))
        or name.startswith("test_")
        or any(part in ("tests", "testdata", "testing") for part in parts)
    )


def _source_files() -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--", *FOLDERS], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the budget is measured on the tracked files")
    return sorted(
        p
        for p in listed
        if (p.endswith(SOURCE_SUFFIXES) or Path(p).name == "CMakeLists.txt")
        and not _is_test(p)
        and (REPO / p).is_file()
    )


def _text(path: str) -> str:
    return (REPO / path).read_text(encoding="utf-8", errors="replace")


def long_files() -> dict[str, int]:
    """Files over MAX_FILE_LINES: path -> lines."""
    found = {}
    for path in _source_files():
        lines = _text(path).count("\n")
        if lines > MAX_FILE_LINES:
            found[path] = lines
    return found


def python_function_lengths(source: str) -> list[tuple[str, int]]:
    """(qualified name, lines from `def` to the last line of the body) of every function, nested ones
    included (a nested function's lines also count for the function around it)."""
    found = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                found.append((name, child.end_lineno - child.lineno + 1))
                walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return found


_CPP_TOKEN = re.compile(
    r'//[^\n]*|/\*.*?\*/|R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
    re.DOTALL,
)
_CONTROL = re.compile(r"^(if|for|while|switch|catch|do|else|try|return)\b")
_SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b|^extern\s*$")


def _blank(match: re.Match) -> str:
    """A comment or literal with everything but its newlines removed, so line numbers stay."""
    return "\n" * match.group(0).count("\n") + ('""' if match.group(0)[:1] in "R\"'" else " ")


def _before_call(header: str) -> str:
    """The header up to its first `(`, without `operator...` names (`operator=` is a function)."""
    return re.sub(r"\boperator\s*\S+?\s*(?=\()", "operator", header).split("(")[0]


def cpp_function_lengths(source: str) -> list[tuple[str, int]]:
    """(name, lines from the opening to the closing brace) of every C++ function body, read with a
    brace scanner rather than a parser. It drops comments, string and character literals (raw
    strings included) and preprocessor lines, then classifies each `{` by the text before it since
    the last `;`, `{` or `}`: `namespace`/`class`/`struct`/`enum`/`extern "C"` open a scope that
    is looked into; a header with `(` that is not a control statement opens a function (methods,
    free functions, and macro bodies such as TEST(...) { or PYBIND11_MODULE(...) {); braces inside
    a function belong to it (lambdas, nested blocks, local classes). Limits: braces that only
    balance across `#if` branches, a function whose header contains a `;` (a default argument
    with a lambda) and a function made by a macro that opens its brace inside the macro are
    mismeasured; an initialiser list at namespace scope (`x = {...}`) is a data block, not counted."""
    text = _CPP_TOKEN.sub(_blank, source)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", "", text, flags=re.MULTILINE)
    found = []
    stack: list[tuple[str, str, int]] = []  # (kind, name, line of the opening brace)
    header_start = 0
    line = 1
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch in ";{}":
            header = " ".join(text[header_start:i].split())
            header_start = i + 1
            if ch == ";":
                continue
            if ch == "}":
                if stack:
                    kind, name, start = stack.pop()
                    if kind == "function":
                        found.append((name, line - start + 1))
                continue
            if stack and stack[-1][0] in ("function", "inner"):
                stack.append(("inner", "", line))
            elif _SCOPE.search(header) and "(" not in header.split("=")[0]:
                stack.append(("scope", "", line))
            elif "(" in header and not _CONTROL.match(header) and "=" not in _before_call(header):
                name = re.findall(r"([~\w:]*operator\s*[^\s(]+|[~\w:]+)\s*\(", header)
                stack.append(("function", name[0] if name else header[:40], line))
            else:
                stack.append(("data", "", line))
    return found


def long_functions() -> dict[str, int]:
    """Functions over MAX_FUNCTION_LINES: "path::name" -> lines."""
    found = {}
    for path in _source_files():
        if path.endswith(".py"):
            lengths = python_function_lengths(_text(path))
        elif path.endswith(CPP_SUFFIXES):
            lengths = cpp_function_lengths(_text(path))
        else:
            continue
        for name, lines in lengths:
            if lines > MAX_FUNCTION_LINES:
                found[f"{path}::{name}"] = max(lines, found.get(f"{path}::{name}", 0))
    return found


def backend_methods() -> list[str]:
    """Every `def` in the body of class Backend (properties, setters and private ones included)."""
    tree = ast.parse(_text("python/aitune/torch/backend/backend.py"))
    backend = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Backend")
    return [n.name for n in backend.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def backend_offender() -> dict[str, int]:
    methods = backend_methods()
    return {BACKEND_ENTRY: len(methods)} if len(methods) > MAX_BACKEND_METHODS else {}


def _check(offenders: dict[str, int], limit: int, what: str) -> None:
    over = {k: v for k, v in offenders.items() if k not in ALLOWED}
    assert not over, f"{what} over {limit} (split them; do not add them to ALLOWED): {over}"


def test_no_file_is_over_the_line_budget():
    _check(long_files(), MAX_FILE_LINES, "files (lines)")


def test_no_function_is_over_the_line_budget():
    _check(long_functions(), MAX_FUNCTION_LINES, "functions (lines)")


def test_the_allow_list_only_names_current_offenders():
    offenders = set(long_files()) | set(long_functions()) | set(backend_offender())
    stale = sorted(ALLOWED - offenders)
    assert not stale, f"no longer over budget, remove from ALLOWED: {stale}"


def test_backend_has_at_most_30_methods():
    """Backend's own surface; the CUDA-graph serving and AITune's helpers live beside it (composition)."""
    _check(backend_offender(), MAX_BACKEND_METHODS, f"Backend methods {backend_methods()}")


def test_the_cpp_scanner_measures_functions_and_skips_scopes_and_literals():
    source = """
namespace a {
// a comment with { a brace
struct S {
  int f(int x) const {
    auto g = [&](int y) { return y + 1; };
    if (x) {
      return g(x);
    }
    return 0;
  }
};
const char* text = R"js(function() { {{ )js";
int table[] = {1, 2, 3};
std::vector<int> made = make({1, 2});
S& operator=(const S& other) { return *this; }
void h() { char c = '{'; }
}  // namespace a
PYBIND11_MODULE(_C, m) {
  m.def("x", [](int v) { return v; });
}
"""
    assert cpp_function_lengths(source) == [("f", 7), ("operator=", 1), ("h", 1), ("PYBIND11_MODULE", 3)]


def test_the_python_measure_counts_from_def_to_the_last_line():
    source = "class C:\n    def m(self):\n        x = 1\n\n        return x\n\n\ndef f():\n    def g():\n        pass\n"
    assert python_function_lengths(source) == [("C.m", 4), ("f", 3), ("f.g", 2)]
