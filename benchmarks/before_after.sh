#!/usr/bin/env bash
# Per-call serving cost of this tree beside an earlier commit, measured in one run on one machine
# (issue 14's acceptance: dispatch overhead not worse than before). Usage, on the GPU machine,
# after `gpu_run.sh` has installed this tree:
#   git archive -o .gpu-carry/before.tar <commit>      # here; .gpu-carry travels as the device tool's carry
#   BEFORE_TAR=.gpu-carry/before.tar bash benchmarks/before_after.sh
# The earlier tree is built into its own folder and put first on PYTHONPATH; each version runs its
# own copy of the benchmark scripts. Rounds alternate before/after so drift hits both alike.
# Writes $OUT/before_after.json (every result) and $OUT/before_after.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aitune-before-after}
PY=${PYTHON:-python3}
ROUNDS=${ROUNDS:-2}
WORK=/tmp/aitune-before-after-work
mkdir -p "$OUT" "$WORK/src"
LOG="$OUT/before_after.log"
: > "$LOG"
tar -xf "${BEFORE_TAR:?set BEFORE_TAR to a git archive of the earlier commit}" -C "$WORK/src"
(cd "$WORK/src" && CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-16} $PY -m pip install -q \
  --no-build-isolation --no-deps --target "$WORK/before" -C cmake.define.AITUNE_BUILD_TESTS=OFF \
  -C cmake.define.AITUNE_BUILD_BENCHMARKS=OFF .) >> "$LOG" 2>&1 || { echo "building the earlier tree failed" | tee -a "$LOG"; exit 1; }
run_version() {  # run_version NAME ROUND
  local name=$1 round=$2 root=. env=()
  if [ "$name" = before ]; then root="$WORK/src"; env=(env "PYTHONPATH=$WORK/before"); fi
  "${env[@]}" $PY "$root/benchmarks/dispatch_overhead.py" --device cuda:0 --out "$WORK/dispatch-$name-$round.json" >> "$LOG" 2>&1
  "${env[@]}" $PY "$root/benchmarks/cuda_graph_overhead.py" --out "$WORK/cuda-graph-$name-$round.json" >> "$LOG" 2>&1
}
for round in $(seq 1 "$ROUNDS"); do
  for name in before after; do run_version "$name" "$round"; done
done
$PY - "$WORK" "$OUT/before_after.json" <<'PYEOF'
import json, pathlib, sys
work, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
results = {p.stem: json.loads(p.read_text()) for p in sorted(work.glob("*.json"))}
out.write_text(json.dumps(results, indent=1))
for name, r in results.items():
    print(name, {k: v for k, v in r.items() if k.endswith("_us")})
PYEOF
