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
set -uo pipefail
cd "$(dirname "$0")/.."
CHAIN=${CHAIN_DIR:-/tmp/aitune-gpu-chain}
case "${1:-}" in
  start)
    [ -f "${2:-}" ] || { echo "usage: $0 start CHAIN_FILE" >&2; exit 2; }
    rm -rf "$CHAIN" && mkdir -p "$CHAIN" && cp "$2" "$CHAIN/chain.txt"
    setsid nohup bash -c '
      while read -r name vars; do
        [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
        eval "env $vars OUT=$0/$name bash benchmarks/gpu_run.sh" > "$0/$name.stdout" 2>&1
        echo "$name rc=$? at ${SECONDS}s" >> "$0/progress"
      done < "$0/chain.txt"
      touch "$0/done"' "$CHAIN" < /dev/null > "$CHAIN/chain.log" 2>&1 &
    echo "chain started (pid $!): $(grep -cv '^\s*\(#\|$\)' "$2") stages"
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
