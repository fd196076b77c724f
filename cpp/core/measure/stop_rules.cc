#include "measure/stop_rules.h"

#include <cmath>
#include <cstdio>

#include "measure/statistics.h"

namespace aitune {
namespace {

std::string positive_message(const char* rule, const char* field, double value) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s: %s must be positive, got %g", rule, field, value);
  return buf;
}

Status validate(const FixedStepsRule& rule) {
  AITUNE_CHECK_ARG(rule.num_steps > 0, positive_message("FixedStepsRule", "num_steps", rule.num_steps));
  AITUNE_CHECK_ARG(rule.warmup_samples > 0,
                   positive_message("FixedStepsRule", "warmup_samples", rule.warmup_samples));
  return Status::Ok();
}

Status validate(const StableWindowRule& rule) {
  AITUNE_CHECK_ARG(rule.window_size > 0,
                   positive_message("StableWindowRule", "window_size", rule.window_size));
  AITUNE_CHECK_ARG(rule.max_cv_ratio > 0 && std::isfinite(rule.max_cv_ratio),
                   positive_message("StableWindowRule", "max_cv_ratio", rule.max_cv_ratio));
  AITUNE_CHECK_ARG(rule.warmup_samples > 0,
                   positive_message("StableWindowRule", "warmup_samples", rule.warmup_samples));
  AITUNE_CHECK_ARG(rule.max_samples > 0,
                   positive_message("StableWindowRule", "max_samples", rule.max_samples));
  AITUNE_CHECK_ARG(rule.max_samples >= rule.window_size,
                   "StableWindowRule: max_samples must be >= window_size, got max_samples=" +
                       std::to_string(rule.max_samples) +
                       ", window_size=" + std::to_string(rule.window_size));
  return Status::Ok();
}

StopDecision decide(const FixedStepsRule& rule, std::span<const double> host_times) {
  const auto warmup = static_cast<size_t>(rule.warmup_samples);
  const auto steps = static_cast<size_t>(rule.num_steps);
  if (host_times.size() < warmup + steps) return {};
  const size_t end = host_times.size();
  return {StopDecision::kStop, end - steps, end, {}};
}

StopDecision decide(const StableWindowRule& rule, std::span<const double> host_times) {
  const auto warmup = static_cast<size_t>(rule.warmup_samples);
  const auto window = static_cast<size_t>(rule.window_size);
  if (host_times.size() < warmup + window) return {};
  const size_t end = host_times.size();
  const size_t begin = end - window;
  const double cv = coefficient_of_variation(host_times.subspan(begin, window));
  if (cv <= rule.max_cv_ratio) return {StopDecision::kStop, begin, end, {}};
  if (end - warmup < static_cast<size_t>(rule.max_samples)) return {};
  char buf[160];
  std::snprintf(
      buf, sizeof(buf),
      "Unable to collect stable results. Current CV of last window: %.2f%%. Expected max CV: %.2f%%.",
      cv * 100.0, rule.max_cv_ratio * 100.0);
  return {StopDecision::kFail, begin, end, buf};
}

}  // namespace

Status validate_stop_rule(const MeasureStopRule& rule) {
  return std::visit([](const auto& r) { return validate(r); }, rule);
}

StopDecision decide_stop(const MeasureStopRule& rule, std::span<const double> host_times) {
  return std::visit([&](const auto& r) { return decide(r, host_times); }, rule);
}

}  // namespace aitune
