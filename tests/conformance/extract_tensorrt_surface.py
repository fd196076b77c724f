"""The API surface of a real TensorRT release, read from its Python bindings wheel.

Rerun this when a new TensorRT ships, to see what changed for aitune (then add the version to
real_wheels.TENSORRT_VERSIONS so the conformance tier checks it):

    python tests/conformance/extract_tensorrt_surface.py 11.4.0.106 --out /tmp/trt-11.4.json
    python tests/conformance/extract_tensorrt_surface.py 10.15.1.29 --diff 11.4.0.106

The wheel (`tensorrt-cu13-bindings`) is fetched into the cache of real_wheels.py and imported in
a child process against stand-ins for TensorRT's native libraries (native_stubs.py): no GPU, CUDA
or TensorRT installation is needed. See tensorrt_surface_child.py for what the JSON holds.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_stubs import child_env, stub_dir  # noqa: E402
from real_wheels import TENSORRT_BINDINGS, unpacked  # noqa: E402

CHILD = Path(__file__).resolve().parent / "tensorrt_surface_child.py"


def bindings_dir(version: str) -> Path:
    """The unpacked bindings wheel of `version` (a folder holding `tensorrt_bindings/`)."""
    return unpacked(TENSORRT_BINDINGS, version)


def bindings_module(version: str) -> Path:
    return bindings_dir(version) / "tensorrt_bindings" / "tensorrt.so"


@functools.lru_cache(maxsize=None)
def surface(version: str) -> dict:
    """The surface of TensorRT `version` (see tensorrt_surface_child.py)."""
    root = bindings_dir(version)
    env = child_env([root], stub_dir(bindings_module(version)))
    result = subprocess.run([sys.executable, str(CHILD)], capture_output=True, text=True, env=env, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"importing the real TensorRT {version} bindings failed:\n{result.stderr[-3000:]}")
    data = json.loads(result.stdout)
    if data["version"] != version:
        raise RuntimeError(f"the {TENSORRT_BINDINGS} {version} wheel reports tensorrt.__version__ {data['version']!r}")
    return data


def diff(old: dict, new: dict) -> list[str]:
    """Human-readable differences between two surfaces: names added or removed, enum values moved."""
    lines = []
    for kind in ("classes", "enums", "functions"):
        for name in sorted(set(old[kind]) - set(new[kind])):
            lines.append(f"- {kind[:-1] if kind != 'classes' else 'class'} {name}")
        for name in sorted(set(new[kind]) - set(old[kind])):
            lines.append(f"+ {kind[:-1] if kind != 'classes' else 'class'} {name}")
    for name in sorted(set(old["classes"]) & set(new["classes"])):
        a, b = old["classes"][name]["members"], new["classes"][name]["members"]
        lines += [f"- {name}.{m}" for m in sorted(set(a) - set(b))] + [f"+ {name}.{m}" for m in sorted(set(b) - set(a))]
        for m in sorted(set(a) & set(b)):
            if a[m].get("signatures") != b[m].get("signatures") or a[m].get("setter") != b[m].get("setter"):
                lines.append(
                    f"~ {name}.{m}: {a[m].get('signatures') or a[m].get('setter')} -> "
                    f"{b[m].get('signatures') or b[m].get('setter')}"
                )
    for name in sorted(set(old["enums"]) & set(new["enums"])):
        a, b = old["enums"][name], new["enums"][name]
        lines += [f"- {name}.{m}" for m in sorted(set(a) - set(b))] + [f"+ {name}.{m}" for m in sorted(set(b) - set(a))]
        lines += [f"~ {name}.{m} = {a[m]} -> {b[m]}" for m in sorted(set(a) & set(b)) if a[m] != b[m]]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="a tensorrt-cu13-bindings version, e.g. 11.4.0.106")
    parser.add_argument("--out", type=Path, help="write the surface JSON here (default: stdout)")
    parser.add_argument("--diff", metavar="VERSION", help="print what changed from this version to VERSION instead")
    args = parser.parse_args(argv)
    data = surface(args.version)
    if args.diff:
        print("\n".join(diff(surface(args.diff), data)) or "no differences")
    elif args.out:
        args.out.write_text(json.dumps(data, indent=1, sort_keys=True))
    else:
        print(json.dumps(data, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
