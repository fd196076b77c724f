#!/usr/bin/env bash
# The GPU machine's one command (./run gpu): build against its torch, run the C++ tests, the
# GPU-marked and the full pytest suite, doctor, and the benchmarks. Results go to $OUT (the
# device tool's results folder, which returns at most 8 files): summary.txt, the benchmark
# JSON files and logs.tgz with every log. Elsewhere $OUT defaults to /tmp/aitune-gpu-out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aitune-gpu-out}
LOGS="$OUT/logs"
mkdir -p "$LOGS"
PY=${PYTHON:-python3}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-16} PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
summary="$OUT/summary.txt"
: > "$summary"
step() {  # step NAME CMD... : runs CMD, logs to $LOGS/NAME.log, records the exit status
  local name=$1; shift
  local start=$SECONDS
  "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  printf '%-16s rc=%d  %4ds\n' "$name" "$rc" "$((SECONDS - start))" | tee -a "$summary"
  return $rc
}
finish() {
  for f in ctest pytest_gpu pytest_all; do echo "--- $f"; tail -4 "$LOGS/$f.log" 2>/dev/null; done >> "$summary"
  { echo "--- demo"; grep RESULT "$LOGS/demo.log"; echo "--- dispatch"; cat "$OUT/dispatch_overhead_gpu.json"
    echo "--- cuda graphs"; cat "$OUT/cuda_graph_overhead.json"; echo "--- zoo"; grep -A20 "^| model" "$LOGS/zoo.log"
  } >> "$summary" 2>/dev/null
  tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
  cat "$summary"
}
trap finish EXIT

# STAGES selects what runs (default: everything but the zoo); ZOO_MODELS adds the model zoo.
STAGES=${STAGES:-"build tests bench demo"}
ZOO_MODELS=${ZOO_MODELS:-}
has() { [[ " $STAGES " == *" $1 "* ]]; }

{ nvidia-smi; $PY -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))'; } > "$LOGS/machine.log" 2>&1
if has build || ! $PY -c 'import aitune._C' 2>/dev/null; then
  step build $PY -m pip install --no-build-isolation --no-deps -v \
    -C cmake.define.AITUNE_BUILD_TESTS=ON -C cmake.define.AITUNE_BUILD_BENCHMARKS=ON . || exit 1
fi
BUILD=$(ls -d build/cp3*/ | head -n1)
if has tests; then
  step ctest ctest --test-dir "$BUILD" --output-on-failure
  step doctor_cli aitune doctor
  step doctor_py $PY -m aitune doctor
  step pytest_gpu bash -c "cd tests && $PY -m pytest -q -p no:cacheprovider -m gpu -rs"
  step pytest_all bash -c "cd tests && $PY -m pytest -q -p no:cacheprovider -rs"
fi
if has bench; then
  step bench_core "$BUILD/cpp/core/aitune_core_bench" --benchmark_repetitions=5 \
    --benchmark_report_aggregates_only=true --benchmark_out="$OUT/core_bench_gpu_host.json" --benchmark_out_format=json
  step bench_dispatch $PY benchmarks/dispatch_overhead.py --device cuda:0 --out "$OUT/dispatch_overhead_gpu.json"
  step bench_cuda_graph $PY benchmarks/cuda_graph_overhead.py --out "$OUT/cuda_graph_overhead.json"
fi
has demo && step demo $PY -m aitune.torch.examples.demo
if [ -n "$ZOO_MODELS" ]; then
  step zoo $PY benchmarks/zoo.py --models $ZOO_MODELS --out "$OUT/zoo.json"
fi
if has roundtrip; then
  step roundtrip $PY benchmarks/checkpoint_roundtrip.py --out "$OUT/roundtrip.json"
fi
