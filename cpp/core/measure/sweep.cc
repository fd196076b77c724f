#include "measure/sweep.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace aitune {
namespace {

// docs/reference/strategies.md#per-graph-pipeline: the sweep covers 2^0 ... 2^20.
constexpr int kMaxBatchExponent = 20;

std::string gain_message(double gain) {
  char buf[128];
  std::snprintf(buf, sizeof(buf),
                "ThroughputSaturatedRule: min_throughput_gain_ratio must be in [0, 1), got %g", gain);
  return buf;
}

}  // namespace

std::vector<int64_t> default_batch_sizes(int64_t max_batch_size) {
  std::vector<int64_t> sizes;
  for (int e = 0; e <= kMaxBatchExponent; ++e) {
    const int64_t bs = int64_t{1} << e;
    if (max_batch_size > 0 && bs > max_batch_size) break;
    sizes.push_back(bs);
  }
  return sizes;
}

Status validate_sweep_rule(const SweepRule& rule) {
  const auto* saturated = std::get_if<ThroughputSaturatedRule>(&rule);
  if (saturated == nullptr) return Status::Ok();
  AITUNE_CHECK_ARG(saturated->min_throughput_gain_ratio >= 0 && saturated->min_throughput_gain_ratio < 1,
                   gain_message(saturated->min_throughput_gain_ratio));
  AITUNE_CHECK_ARG(saturated->throughput_backoff_limit >= 0,
                   "ThroughputSaturatedRule: throughput_backoff_limit must be >= 0, got " +
                       std::to_string(saturated->throughput_backoff_limit));
  return Status::Ok();
}

bool SweepState::add(int64_t batch_size, double throughput_per_s) {
  // NaN (a broken timer) never becomes the best and counts as saturated.
  const bool is_nan = std::isnan(throughput_per_s);
  if (!is_nan && (!best_batch_size_ || throughput_per_s > best_throughput_)) {
    best_batch_size_ = batch_size;
    best_throughput_ = throughput_per_s;
  }
  if (stopped_) return true;
  const auto* saturated = std::get_if<ThroughputSaturatedRule>(&rule_);
  if (saturated == nullptr) return false;

  const bool is_saturated =
      is_nan || (reference_throughput_.has_value() &&
                 throughput_per_s * (1.0 - saturated->min_throughput_gain_ratio) < *reference_throughput_);
  if (!is_saturated) {
    reference_throughput_ = throughput_per_s;
    consecutive_saturated_ = 0;
    return false;
  }
  ++consecutive_saturated_;
  stopped_ = consecutive_saturated_ > saturated->throughput_backoff_limit;
  return stopped_;
}

}  // namespace aitune
