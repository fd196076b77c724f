"""Why one build is slower than another on the GPU: the CUDA kernels each one runs per call.

For one zoo model (benchmarks/zoo.py, random weights, batch 1), in one process per side: aitune's
defaults (`ait.tune(ait.Module(model), dataset)`) and `torch.compile(mode="reduce-overhead")` with
Inductor's global `freezing` switch (the best torch reference on BERT, issue 22). Each side runs
`--calls` calls under torch.profiler; the kernels are summed by name and printed per call, largest
first, with the kernel count and the GPU time per call. Diffing the two tables shows where the time
goes (different GEMM choices, extra copies, unfused ops).

    python tools/diagnostics/kernel_diff.py --model bert --out kernel_diff.json

A diagnostic, not a benchmark: profiling adds per-kernel overhead, so compare the two sides' tables,
not these totals with benchmarks/defaults.py's.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def side(name: str, model_name: str, calls: int) -> dict[str, object]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    sys.path.insert(0, str(BENCHMARKS))
    import defaults
    import zoo

    torch.manual_seed(0)
    model, make_inputs, batch, dtype = zoo.build(model_name)
    model = model.eval().cuda().to(dtype)
    args = zoo.to(make_inputs(batch), dtype, "cuda")
    info: dict[str, object] = {"side": name}
    if name == "aitune":
        import aitune.torch as ait

        args4 = zoo.to(make_inputs(4), dtype, "cuda")
        wrapped = ait.Module(model)
        ait.tune(wrapped, [tuple(a[i] for a in args4) for i in range(4)], device="cuda")
        info["picks"] = [b.describe() for _, b in wrapped.tuned_module.backends] if wrapped.tuned_module else []
        fn = wrapped
    else:
        torch._inductor.config.freezing = True
        fn = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(20):
            fn(*args)
        torch.cuda.synchronize()
        # benchmarks/defaults.py's pipelined column, measured before the profiler is on.
        info["pipelined_us"] = round(1000 * defaults.pipelined_ms(lambda: fn(*args), torch.cuda.synchronize), 1)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(*args)
            torch.cuda.synchronize()
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    starts, ends = [], []
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            entry = totals[event.name]
            entry[0] += event.device_time  # µs
            entry[1] += 1
            starts.append(event.time_range.start)
            ends.append(event.time_range.end)
    rows = sorted(((us / calls, n / calls, k) for k, (us, n) in totals.items()), reverse=True)
    info["gpu_us_per_call"] = round(sum(r[0] for r in rows), 1)
    # The GPU's span per call (first activity's start to the last one's end, over the calls):
    # span minus busy time is the GPU idle between activities (launch gaps, waits on the host).
    info["gpu_span_us_per_call"] = round((max(ends) - min(starts)) / calls, 1) if starts else None
    info["kernels_per_call"] = round(sum(r[1] for r in rows), 1)
    info["kernels"] = [{"us": round(us, 2), "n": round(n, 2), "name": k[:160]} for us, n, k in rows[:40]]
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="bert")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--out", default="kernel_diff.json")
    parser.add_argument("--side", choices=["aitune", "torch"], help=argparse.SUPPRESS)  # a child's side
    args = parser.parse_args()
    if args.side:
        print(json.dumps(side(args.side, args.model, args.calls)))
        return
    results = []
    for name in ("aitune", "torch"):  # one process each: compile state is process-wide
        cmd = [sys.executable, __file__, "--side", name, "--model", args.model, "--calls", str(args.calls)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        results.append(json.loads(lines[-1]) if lines else {"side": name, "error": done.stderr[-3000:]})
    Path(args.out).write_text(json.dumps(results, indent=1))
    for info in results:
        print(
            f"== {info['side']}: {info.get('gpu_us_per_call')} µs GPU busy/call, span {info.get('gpu_span_us_per_call')} µs, "
            f"pipelined {info.get('pipelined_us')} µs, {info.get('kernels_per_call')} kernels"
        )
        print("   picks:", info.get("picks", "-"), info.get("error", ""))
        for row in info.get("kernels", [])[:25]:
            print(f"   {row['us']:9.2f} µs  x{row['n']:<5} {row['name'][:110]}")


if __name__ == "__main__":
    main()
