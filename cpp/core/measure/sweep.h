// Batch-size sweep of docs/reference/measurement.md: which batch sizes to try, and when throughput has
// saturated so that larger sizes are not worth measuring.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "common/status.h"

namespace aitune {

// 1, 2, 4, ..., 2^20, keeping those <= max_batch_size; no cap when max_batch_size <= 0.
std::vector<int64_t> default_batch_sizes(int64_t max_batch_size);

// ThroughputSaturatedProfilingStopStrategy.
struct ThroughputSaturatedRule {
  double min_throughput_gain_ratio = 0.05;
  int throughput_backoff_limit = 2;
};

// AllSamplesProfilingStopStrategy: every batch size is measured.
struct AllSamplesRule {};

using SweepRule = std::variant<ThroughputSaturatedRule, AllSamplesRule>;

// kInvalidArgument unless 0 <= min_throughput_gain_ratio < 1 and throughput_backoff_limit >= 0.
Status validate_sweep_rule(const SweepRule& rule);

// Fed one measured batch size at a time, in sweep order. Not thread-safe; one per sweep.
class SweepState {
 public:
  // `rule` must be valid (validate_sweep_rule).
  explicit SweepState(SweepRule rule) : rule_(rule) {}

  // Records a measured batch size; true when the sweep should stop (and stays true afterwards).
  // Throughput is judged on measured calls only (docs/reference/measurement.md#one-measured-call).
  bool add(int64_t batch_size, double throughput_per_s);

  // Highest throughput seen (ties keep the earlier size); nullopt / 0 before the first add.
  std::optional<int64_t> best_batch_size() const { return best_batch_size_; }
  double best_throughput() const { return best_throughput_; }

 private:
  SweepRule rule_;
  // Saturation reference: updated only by unsaturated sizes, so a slow creep of small gains
  // after the plateau still counts as saturated.
  std::optional<double> reference_throughput_;
  int consecutive_saturated_ = 0;
  bool stopped_ = false;
  std::optional<int64_t> best_batch_size_;
  double best_throughput_ = 0.0;
};

}  // namespace aitune
