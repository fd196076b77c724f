# Sourced by benchmarks/gpu_run.sh and tools/diagnostics/aoti_diag.sh: one logged step of a
# device run. Needs LOGS (a folder) and summary (a file); STEP_WIDTH pads the step names.
step() {  # step NAME CMD... : runs CMD, logs to $LOGS/NAME.log, records the exit status
  local name=$1; shift
  local start=$SECONDS
  "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  printf "%-${STEP_WIDTH:-16}s rc=%d  %4ds\n" "$name" "$rc" "$((SECONDS - start))" | tee -a "$summary"
  return $rc
}
