#!/usr/bin/env bash
# The GPU machine's one command (./run gpu): build against its torch, run the C++ tests, the
# GPU-marked and the full pytest suite, doctor, and the benchmarks. Logs go to $OUT (the
# device tool's results folder), or to /tmp/aitune-gpu-out elsewhere.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aitune-gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-16}
summary="$OUT/summary.txt"
: > "$summary"
step() {  # step NAME CMD... : runs CMD, logs to $OUT/NAME.log, records the exit status
  local name=$1; shift
  local start=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%-16s rc=%d  %4ds\n' "$name" "$rc" "$((SECONDS - start))" | tee -a "$summary"
  return $rc
}

{ nvidia-smi; $PY -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))'; } > "$OUT/machine.log" 2>&1
step build $PY -m pip install --no-build-isolation --no-deps -v \
  -C cmake.define.AITUNE_BUILD_TESTS=ON -C cmake.define.AITUNE_BUILD_BENCHMARKS=ON . || { tail -50 "$OUT/build.log"; exit 1; }
BUILD=$(ls -d build/cp3*/ | head -n1)
step ctest ctest --test-dir "$BUILD" --output-on-failure
step doctor_cli aitune doctor
step doctor_py $PY -m aitune doctor
step pytest_gpu bash -c "cd tests && $PY -m pytest -q -p no:cacheprovider -m gpu -rs"
step pytest_all bash -c "cd tests && $PY -m pytest -q -p no:cacheprovider -x -rs"
step bench_core "$BUILD/cpp/core/aitune_core_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_out="$OUT/core_bench_gpu_host.json" --benchmark_out_format=json
step bench_dispatch $PY benchmarks/dispatch_overhead.py --device cuda:0 --out "$OUT/dispatch_overhead_gpu.json"
step demo $PY -m aitune.torch.examples.demo
for f in ctest pytest_gpu pytest_all; do echo "--- $f"; tail -3 "$OUT/$f.log"; done | tee -a "$summary"
echo "--- dispatch"; cat "$OUT/dispatch_overhead_gpu.json" 2>/dev/null | tee -a "$summary"
grep RESULT "$OUT/demo.log" | tee -a "$summary"
