"""The AOTInductor load fix (global_libstdcxx.py): after promotion, libstdc++'s symbols are in
the process's global scope, which is what a package's model library resolves against first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import aitune

CHILD = r"""
import ctypes, torch
from aitune.torch.backend.torch_inductor_aot.global_libstdcxx import mapped_libstdcxx, promote_libstdcxx
symbol = "_ZSt9terminatev"  # std::terminate(), defined by libstdc++
before = hasattr(ctypes.CDLL(None), symbol)
path = promote_libstdcxx()
after = hasattr(ctypes.CDLL(None), symbol)
print(before, after, path == mapped_libstdcxx(), promote_libstdcxx() == path)
"""


def test_promotion_puts_libstdcxx_symbols_in_the_global_scope():
    from aitune.torch.backend.torch_inductor_aot.global_libstdcxx import mapped_libstdcxx

    if mapped_libstdcxx() is None:
        pytest.skip("no libstdc++ is mapped in this process (not a glibc/libstdc++ platform)")
    package_root = str(Path(aitune.__file__).resolve().parent.parent)  # the aitune this test imports
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [package_root, os.environ.get("PYTHONPATH")] if p))
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    before, after, same_path, idempotent = out.stdout.split()
    assert after == "True"
    assert same_path == "True" and idempotent == "True"
    if before == "True":
        pytest.skip(
            "libstdc++ was already global in this interpreter (the python binary links it); "
            "the promotion had nothing to change"
        )
