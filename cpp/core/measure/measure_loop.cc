#include "measure/measure_loop.h"

#include <charconv>
#include <cmath>
#include <vector>

namespace aitune {
namespace {

constexpr double kNsPerMs = 1e6;
constexpr double kNsPerS = 1e9;

Status check_timing(const CallTiming& timing, size_t index) {
  if (!std::isfinite(timing.host_ns) || timing.host_ns < 0) {
    return internal_error("measured call " + std::to_string(index) +
                          " returned an invalid host time; expected a finite value >= 0 ns, got " +
                          std::to_string(timing.host_ns));
  }
  if (timing.device_ms && (!std::isfinite(*timing.device_ms) || *timing.device_ms < 0)) {
    return internal_error("measured call " + std::to_string(index) +
                          " returned an invalid device time; expected a finite value >= 0 ms, got " +
                          std::to_string(*timing.device_ms));
  }
  return Status::Ok();
}

// Shortest text that reads back to the same double; JSON has no NaN/inf, so those become null.
void append_number(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, end);
}

void append_key(std::string& out, const char* key) {
  if (out.size() > 1) out += ", ";
  out += '"';
  out += key;
  out += "\": ";
}

void append_stats(std::string& out, const char* prefix, const char* cv_key,
                  const std::optional<LatencyStats>& stats) {
  const std::pair<const char*, double LatencyStats::*> fields[] = {
      {"mean", &LatencyStats::mean}, {"median", &LatencyStats::median}, {"p90", &LatencyStats::p90},
      {"p99", &LatencyStats::p99},   {"min", &LatencyStats::min},       {"max", &LatencyStats::max},
      {"std", &LatencyStats::std},
  };
  for (const auto& [name, member] : fields) {
    append_key(out, (std::string(prefix) + name).c_str());
    if (stats) {
      append_number(out, (*stats).*member);
    } else {
      out += "null";
    }
  }
  append_key(out, cv_key);
  if (stats) {
    append_number(out, stats->cv);
  } else {
    out += "null";
  }
}

}  // namespace

StatusOr<BatchResult> measure_batch(int64_t batch_size, const MeasureStopRule& rule,
                                    const std::function<StatusOr<CallTiming>(size_t call_index)>& call) {
  AITUNE_CHECK_ARG(batch_size > 0,
                   "measure_batch: batch_size must be positive, got " + std::to_string(batch_size));
  AITUNE_RETURN_IF_ERROR(validate_stop_rule(rule));

  std::vector<double> host_ns;
  std::vector<std::optional<double>> device_ms;
  StopDecision decision;
  for (size_t index = 0;; ++index) {
    AITUNE_ASSIGN_OR_RETURN(CallTiming timing, call(index));
    AITUNE_RETURN_IF_ERROR(check_timing(timing, index));
    host_ns.push_back(timing.host_ns);
    device_ms.push_back(timing.device_ms);
    decision = decide_stop(rule, host_ns);
    if (decision.kind == StopDecision::kFail) return Status(StatusCode::kBackendError, decision.message);
    if (decision.kind == StopDecision::kStop) break;
  }

  const size_t begin = decision.measured_begin;
  const size_t count = decision.measured_end - begin;
  std::vector<double> host_latency_ms;
  host_latency_ms.reserve(count);
  for (size_t i = begin; i < decision.measured_end; ++i) host_latency_ms.push_back(host_ns[i] / kNsPerMs);
  std::vector<double> device_time_ms;
  for (size_t i = begin; i < decision.measured_end; ++i) {
    if (!device_ms[i]) break;
    device_time_ms.push_back(*device_ms[i]);
  }

  BatchResult result;
  result.batch_size = batch_size;
  result.num_warmup_calls = static_cast<int>(begin);
  result.num_measured_calls = static_cast<int>(count);
  result.host_latency_ms = compute_stats(host_latency_ms);
  if (device_time_ms.size() == count) result.device_time_ms = compute_stats(device_time_ms);

  // Mean over the raw ns values rather than the ms statistics, so throughput is exactly
  // bs * 1e9 / mean ns without a round trip through the unit conversion.
  double sum_ns = 0.0;
  for (size_t i = begin; i < decision.measured_end; ++i) sum_ns += host_ns[i];
  const double mean_ns = sum_ns / static_cast<double>(count);
  if (mean_ns <= 0) {
    return internal_error(
        "measure_batch: mean host time over the measured calls is 0 ns; cannot compute throughput");
  }
  result.throughput_per_s = static_cast<double>(batch_size) * kNsPerS / mean_ns;
  return result;
}

std::string to_json(const BatchResult& result) {
  std::string out = "{";
  append_key(out, "batch_size");
  out += std::to_string(result.batch_size);
  append_key(out, "num_warmup_calls");
  out += std::to_string(result.num_warmup_calls);
  append_key(out, "num_measured_calls");
  out += std::to_string(result.num_measured_calls);
  append_stats(out, "host_latency_ms_", "host_latency_cv", result.host_latency_ms);
  append_stats(out, "device_time_ms_", "device_time_cv", result.device_time_ms);
  append_key(out, "throughput_per_s");
  append_number(out, result.throughput_per_s);
  out += "}";
  return out;
}

}  // namespace aitune
