#!/usr/bin/env bash
# Why AOTInductor packages crash on a GPU image (an investigation, not a test: it was a stage of the
# GPU run until the crash was understood; see benchmarks/RESULTS.md, "AOTInductor packages now load
# inside Python"). Needs torch with CUDA, not aitune. Runs aoti_diag.py in each mode: plain, with the
# system libstdc++ preloaded, with libstdc++ promoted to the global scope before and after
# `import torch`; then which objects the package's symbols bind to (LD_DEBUG), and a native
# backtrace where gdb exists.
#
#   bash tools/diagnostics/aoti_diag.sh        # PYTHON (default python3), OUT (default /tmp/aitune-aoti-diag)
#
# Results go to $OUT: summary.txt (exit status and tail of each step, the bindings, the backtrace)
# and logs.tgz with every log (the device tool returns at most 8 files).
set -uo pipefail
DIAG="$(cd "$(dirname "$0")" && pwd)/aoti_diag.py"
OUT=${OUT:-/tmp/aitune-aoti-diag}
LOGS="$OUT/logs"
mkdir -p "$LOGS"
PY=${PYTHON:-python3}
LIBSTDCXX=${LIBSTDCXX:-/usr/lib/x86_64-linux-gnu/libstdc++.so.6}
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
summary="$OUT/summary.txt"
: > "$summary"
STEP_WIDTH=24
source "$(dirname "$DIAG")/../../benchmarks/steps.sh"
finish() {
  for f in aoti_diag aoti_diag_preload aoti_diag_global_first aoti_diag_global_after; do
    [ -f "$LOGS/$f.log" ] && { echo "--- $f"; tail -6 "$LOGS/$f.log"; }
  done >> "$summary"
  [ -f "$LOGS/aoti_bindings.log" ] && { echo "--- aoti_bindings"; head -60 "$LOGS/aoti_bindings.log"; } >> "$summary"
  [ -f "$LOGS/aoti_diag_gdb.log" ] && { echo "--- aoti_diag_gdb"; grep -E '^#[0-9]+ ' "$LOGS/aoti_diag_gdb.log" | head -25; } >> "$summary"
  tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
  cat "$summary"
}
trap finish EXIT

step aoti_diag "$PY" "$DIAG" plain
step aoti_diag_preload env LD_PRELOAD="$LIBSTDCXX" "$PY" "$DIAG"
step aoti_diag_global_first "$PY" "$DIAG" global-first
step aoti_diag_global_after "$PY" "$DIAG" global-after
# Which objects the package's symbols bind to when the load crashes (first 400 lines of them):
# bindings out of the package's library, other than to the C/C++ runtime itself.
env LD_DEBUG=bindings LD_DEBUG_OUTPUT="$LOGS/ld" "$PY" "$DIAG" plain > "$LOGS/aoti_ld.log" 2>&1
cat "$LOGS"/ld.* 2>/dev/null | grep -E "binding file /tmp/[^ ]*\.so" |
  grep -vE "to (/usr/lib|/lib)/x86_64-linux-gnu/lib(c|m|stdc\+\+|gcc_s)\.so" > "$LOGS/aoti_bindings_all.log"
{ sed -E 's/.* to ([^ ]+) .*/\1/' "$LOGS/aoti_bindings_all.log" | sort | uniq -c | sort -rn
  grep -v "/torch/lib/" "$LOGS/aoti_bindings_all.log" | head -200; } > "$LOGS/aoti_bindings.log"
rm -f "$LOGS"/ld.* "$LOGS/aoti_bindings_all.log"
if command -v gdb >/dev/null; then
  step aoti_diag_gdb gdb -q -batch -ex run -ex bt -ex "info sharedlibrary" --args "$PY" "$DIAG"
fi
