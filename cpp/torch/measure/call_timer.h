// Timing of one measured call (docs/reference/measurement.md#one-measured-call): host wall time always,
// device time from CUDA events when the call runs on a CUDA device. The measurement loop and its stop rules
// live in cpp/core/measure; this file only brackets one call.
#pragma once

#include <functional>
#include <optional>

#include "common/status.h"

namespace aitune {

struct TimedCall {
  double host_ns = 0.0;             // steady_clock wall time of the call, nanoseconds
  std::optional<double> device_ms;  // start-to-end CUDA event time, milliseconds; nullopt on the CPU
};

// Runs `fn` once under no_grad and times it. With `cuda_device`: (1) synchronise that device;
// (2) read the host clock and record a start event on the device's current stream; (3) call;
// (4) record the end event, synchronise the device and read the clock again. Without it, only
// the host clock brackets the call. Fresh inputs for each call are the caller's business and
// must be made before calling this.
// Errors: `fn`'s own Status is returned as is; kBackendUnavailable when a CUDA device is asked
// for and none is available (or the index is out of range); kCudaError when CUDA fails.
StatusOr<TimedCall> time_call(const std::function<Status()>& fn, std::optional<int> cuda_device);

}  // namespace aitune
