// The measuring loop of docs/reference/measurement.md#one-measured-call for one batch size, independent of
// how a call is made: the caller supplies one timed call (serving path, synchronisation, CUDA events), this
// file runs the stop rule and turns the timings into the docs/reference/measurement.md#batch-sweep result
// fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "measure/statistics.h"
#include "measure/stop_rules.h"

namespace aitune {

// One measured call: host wall time (monotonic clock) and the CUDA-event time, null on the CPU.
struct CallTiming {
  double host_ns = 0.0;
  std::optional<double> device_ms;
};

struct BatchResult {
  int64_t batch_size = 0;
  // Calls made before the ones the statistics cover: the rule's warmup, plus, for the stable
  // window rule, measured calls that fell out of the final window.
  int num_warmup_calls = 0;
  int num_measured_calls = 0;  // calls the statistics cover
  LatencyStats host_latency_ms;
  // Only when every covered call reported a device time.
  std::optional<LatencyStats> device_time_ms;
  double throughput_per_s = 0.0;  // batch_size * 1e9 / mean host ns
};

// Calls `call(0)`, `call(1)`, ... until `rule` stops. A call's error Status is returned as is; an
// unstable stable-window run gives kBackendError with the docs/reference/errors.md message; an invalid rule
// or batch size kInvalidArgument; a negative or non-finite timing kInternal.
StatusOr<BatchResult> measure_batch(int64_t batch_size, const MeasureStopRule& rule,
                                    const std::function<StatusOr<CallTiming>(size_t call_index)>& call);

// One JSON object with the docs/reference/measurement.md#batch-sweep field names; device fields are null when
// absent.
std::string to_json(const BatchResult& result);

}  // namespace aitune
