"""Every backend folder has the same file names and imports no sibling backend; nothing probes a
backend for undeclared hooks (docs/design.md#adding-a-backend)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import aitune.torch.backend as backend_pkg

ROOT = Path(backend_pkg.__file__).parent
PACKAGE = Path(backend_pkg.__file__).parents[2]  # .../aitune
# Not backends: the shared helpers, and `kernels`, AITune's path of the kernel profiler (an api module).
NOT_BACKENDS = ("common", "kernels", "__pycache__")
FOLDERS = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name not in NOT_BACKENDS)


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_eight_backend_folders_are_there():
    assert FOLDERS == [
        "onnx_runtime",
        "tensorrt",
        "torch_eager",
        "torch_inductor_aot",
        "torch_inductor_jit",
        "torch_tensorrt_aot",
        "torch_tensorrt_jit",
        "torchao",
    ]


def test_every_backend_folder_has_the_same_file_names():
    for name in FOLDERS:
        files = {p.name for p in (ROOT / name).glob("*.py")}
        assert {"__init__.py", f"{name}_backend.py", f"{name}_config.py"} <= files, name


def test_no_backend_imports_a_sibling_backend():
    for name in FOLDERS + ["common"]:
        siblings = [f"aitune.torch.backend.{other}" for other in FOLDERS if other != name]
        for path in (ROOT / name).glob("*.py"):
            for module in _imported_modules(path):
                assert not any(module == s or module.startswith(s + ".") for s in siblings), (path, module)


def test_nothing_probes_a_backend_for_undeclared_hooks():
    probe = re.compile(
        r"(hasattr|getattr)\((backend|blueprint|cls|self)(\.config)?, \"(from_checkpoint|"
        r"fingerprint_requires|num_native_outputs|use_cuda_graphs|_restored_profile|"
        r"_cuda_graph_settings)\""
    )
    hits = [
        f"{p}: {line.strip()}"
        for p in PACKAGE.rglob("*.py")
        for line in p.read_text().splitlines()
        if probe.search(line)
    ]
    assert hits == []
