"""CPU micro-benchmarks: the C++ graph-key benchmark (Google Benchmark) and the Python
dispatch overhead. Usage: python benchmarks/run_cpu.py <cmake build dir>"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent


def main() -> int:
    build = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    out = here / "results"
    out.mkdir(exist_ok=True)
    bench = next(build.rglob("aitune_core_bench"), None) if build else None
    if bench is None:
        print("aitune_core_bench not found: build with -DAITUNE_BUILD_BENCHMARKS=ON (./run bench does)")
        return 1
    subprocess.run(
        [
            str(bench),
            "--benchmark_repetitions=5",
            "--benchmark_report_aggregates_only=true",
            f"--benchmark_out={out / 'core_bench_cpu.json'}",
            "--benchmark_out_format=json",
        ],
        check=True,
    )
    subprocess.run(
        [
            sys.executable,
            str(here / "dispatch_overhead.py"),
            "--device",
            "cpu",
            "--out",
            str(out / "dispatch_overhead_cpu.json"),
        ],
        check=True,
    )
    print(json.dumps(json.loads((out / "dispatch_overhead_cpu.json").read_text()), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
