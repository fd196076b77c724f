// Measurement stop rules of docs/reference/measurement.md#one-measured-call: when to stop calling a backend
// at one batch size, and which calls the statistics cover. Pure functions over the host times so far, so the
// Python and C++ measuring loops share one decision.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <variant>

#include "common/status.h"

namespace aitune {

// NumStepsMeasuringStopStrategy: warmup_samples calls, then num_steps measured calls.
struct FixedStepsRule {
  int num_steps = 20;
  int warmup_samples = 10;
};

// StableWindowMeasuringStopStrategy: after warmup, stop once the CV of the last window_size
// host times is <= max_cv_ratio; fail after max_samples measured calls without that.
struct StableWindowRule {
  int window_size = 20;
  double max_cv_ratio = 0.10;
  int warmup_samples = 10;
  int max_samples = 100;
};

using MeasureStopRule = std::variant<FixedStepsRule, StableWindowRule>;

struct StopDecision {
  enum Kind { kContinue, kStop, kFail };
  Kind kind = kContinue;
  // [measured_begin, measured_end) indexes the host times the statistics cover; set for kStop
  // (and for kFail, the window whose CV was too high).
  size_t measured_begin = 0;
  size_t measured_end = 0;
  // For kFail: the docs/reference/errors.md text, raised to the user as is.
  std::string message;
};

// kInvalidArgument unless every count is positive, max_cv_ratio is positive and finite, and
// max_samples >= window_size (a window must fit in the allowed measured calls).
Status validate_stop_rule(const MeasureStopRule& rule);

// Decision after the call that produced host_times.back(); `host_times` holds every call so far,
// warmup included, in any unit. The rule must be valid (validate_stop_rule).
StopDecision decide_stop(const MeasureStopRule& rule, std::span<const double> host_times);

}  // namespace aitune
