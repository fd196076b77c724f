#!/usr/bin/env bash
# Runs several gpu_run.sh stages one after another, detached, so they outlive one device call (10
# minutes at most) while the machine stays warm, and later calls collect what they wrote so far.
#
#   bash benchmarks/gpu_chain.sh start CHAIN_FILE   # first call (after a build): starts, returns at once
#   bash benchmarks/gpu_chain.sh wait SECONDS       # each call: waits up to SECONDS (or until the
#                                                   # chain ends), then copies results into $OUT
#
# CHAIN_FILE has one stage per line: a name, then gpu_run.sh's variables, e.g.
#   t1 STAGES=torchao TORCHAO_ARGS="--models bert_b32 --mode default"
#   d1 STAGES=defaults DEFAULTS_ARGS="--models bert_b32 mlp --rows ait_defaults max-autotune"
# `wait` copies two files per stage into $OUT/<name>/ (the device tool returns a few files only):
# the stage's JSON results and status.txt (its tables, its summary once done, the end of its log).
# Give `wait` a few seconds less than what is left of the call's limit: a call killed at its limit
# returns nothing. `wait` counts from its own start, so after a build in the same call subtract the
# time that took, e.g. `...build...; bash benchmarks/gpu_chain.sh wait $((565 - SECONDS))`.
#
# Lanes, on a machine of several GPUs: a stage named `name@K` runs on GPU K (CUDA_VISIBLE_DEVICES=K)
# with GPU K's share of the CPU cores (taskset: cores K*C/G .. (K+1)*C/G-1 of C cores and G GPUs,
# the one-GPU machine's 16 on an 8-GPU host of 128), and the stages of one lane run one after another
# while the lanes run side by side; `name` alone is lane 0. Keep the rows a comparison is made of in
# one lane (one GPU, one run): lanes multiply the stages one device call runs, not a model's rows.
# With one lane nothing is pinned: a stage runs as it would alone. A stage named `name@all` (one
# that uses every GPU, e.g. serving with --devices cuda:0,cuda:1) runs after all lanes are done,
# alone and unpinned.
set -uo pipefail
cd "$(dirname "$0")/.."
CHAIN=${CHAIN_DIR:-/tmp/aitune-gpu-chain}

stages() {  # the chain file's stage lines, comments and blank lines left out
  grep -v '^[[:space:]]*\(#\|$\)' "$1"
}

lane_of() {  # lane_of NAME: K for `name@K`, else 0
  case "$1" in *@*) echo "${1##*@}" ;; *) echo 0 ;; esac
}

run_lane() {  # run_lane CHAIN LANE PINNED: the lane's stages in order
  local chain=$1 lane=$2 pinned=$3 name vars pin=()
  if [ "$pinned" = 1 ] && [ "$lane" != all ]; then
    local gpus cores per
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') cores=$(nproc)
    [ "$gpus" -ge 1 ] || gpus=1
    per=$((cores / gpus))
    if ! [[ "$lane" =~ ^[0-9]+$ ]] || [ "$lane" -ge "$gpus" ]; then
      echo "lane $lane: this machine has $gpus GPU(s); its stages did not run" >> "$chain/progress"
      return
    fi
    export CUDA_VISIBLE_DEVICES=$lane
    pin=(taskset -c "$((lane * per))-$((lane * per + per - 1))")
  fi
  while read -r name vars; do
    [ "$(lane_of "$name")" = "$lane" ] || continue
    local dir="$chain/${name%@*}"
    eval "env $vars OUT=$dir ${pin[*]} bash benchmarks/gpu_run.sh" > "$dir.stdout" 2>&1
    echo "$name rc=$? at ${SECONDS}s" >> "$chain/progress"
  done < <(stages "$chain/chain.txt")
}

case "${1:-}" in
  start)
    [ -f "${2:-}" ] || { echo "usage: $0 start CHAIN_FILE" >&2; exit 2; }
    names=$(stages "$2" | awk '{print $1}')
    duplicate=$(printf '%s\n' "$names" | sed 's/@.*//' | sort | uniq -d | head -n1)
    [ -z "$duplicate" ] || { echo "$0: two stages are named '$duplicate' (their results would share a folder)" >&2; exit 2; }
    rm -rf "$CHAIN" && mkdir -p "$CHAIN" && cp "$2" "$CHAIN/chain.txt"
    setsid nohup bash "$0" run-lanes "$CHAIN" < /dev/null > "$CHAIN/chain.log" 2>&1 &
    lanes=$(for n in $names; do lane_of "$n"; done | sort -u | wc -l)
    echo "chain started (pid $!): $(printf '%s\n' "$names" | grep -c .) stages in $lanes lane(s)"
    ;;
  run-lanes)  # internal: what `start` runs detached
    lanes=$(stages "$2/chain.txt" | awk '{print $1}' | while read -r n; do lane_of "$n"; done | grep -vx all | sort -u)
    pinned=0
    [ "$(printf '%s\n' "$lanes" | grep -c .)" -gt 1 ] && pinned=1
    for lane in $lanes; do run_lane "$2" "$lane" "$pinned" & done
    wait
    run_lane "$2" all 0
    touch "$2/done"
    ;;
  wait)
    until_s=${2:?usage: $0 wait SECONDS}
    while [ ! -f "$CHAIN/done" ] && [ "$SECONDS" -lt "$until_s" ]; do sleep 5; done
    cat "$CHAIN/progress" 2>/dev/null
    [ -f "$CHAIN/done" ] && echo "chain done" || echo "chain still running"
    OUT=${OUT:-/tmp/aitune-gpu-out}
    for dir in "$CHAIN"/*/; do
      [ -d "$dir" ] || continue
      name=$(basename "$dir")
      mkdir -p "$OUT/$name"
      cp "$dir"/*.json "$OUT/$name/" 2>/dev/null
      { cat "$dir"/logs/*.md 2>/dev/null; cat "$dir/summary.txt" 2>/dev/null
        for log in "$dir"/logs/*.log; do [ -f "$log" ] && { echo "--- $log"; tail -c 15000 "$log"; }; done
      } > "$OUT/$name/status.txt"
      echo "== $name"; grep -E '^\| |rc=' "$OUT/$name/status.txt" | cut -c1-300 | tail -30
    done
    ;;
  *) echo "usage: $0 start CHAIN_FILE | wait SECONDS" >&2; exit 2 ;;
esac
