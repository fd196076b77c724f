#include "select/selection.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace aitune {
namespace {

constexpr double kGateEpsilon = 1e-12;

double gate_threshold(double threshold_percent) { return 1.0 + threshold_percent / 100.0; }

bool better(double a, double b, MetricKind kind) { return kind == MetricKind::kThroughput ? a > b : a < b; }

}  // namespace

bool passes_first_wins_gate(double speedup, double threshold_percent) {
  return speedup >= gate_threshold(threshold_percent) - kGateEpsilon;
}

GateVerdict first_wins_gate(std::span<const double> speedups, double threshold_percent) {
  GateVerdict v;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (speedups.empty()) {
    v.geomean_speedup = v.worst_speedup = nan;
    return v;
  }
  double log_sum = 0.0;
  v.worst_speedup = speedups[0];
  for (size_t i = 0; i < speedups.size(); ++i) {
    const double s = speedups[i];
    if (!(s > 0)) {  // NaN, zero or negative: not a measurement the gate can judge
      v.geomean_speedup = v.worst_speedup = nan;
      v.worst_index = i;
      return v;
    }
    log_sum += std::log(s);
    if (s < v.worst_speedup) {
      v.worst_speedup = s;
      v.worst_index = i;
    }
  }
  v.geomean_speedup = std::exp(log_sum / static_cast<double>(speedups.size()));
  v.too_slow_somewhere = v.worst_speedup < 1.0 - kMaxGateSlowdown - kGateEpsilon;
  v.passed = passes_first_wins_gate(v.geomean_speedup, threshold_percent) && !v.too_slow_somewhere;
  return v;
}

bool passes_profiling_gate(double speedup, double threshold_percent) {
  return speedup > gate_threshold(threshold_percent);
}

double speedup_throughput(double candidate_per_s, double baseline_per_s) {
  if (!(candidate_per_s > 0) || !(baseline_per_s > 0)) return std::numeric_limits<double>::quiet_NaN();
  return candidate_per_s / baseline_per_s;
}

double speedup_latency(double candidate_ms, double baseline_ms) {
  if (!(candidate_ms > 0) || !(baseline_ms > 0)) return std::numeric_limits<double>::quiet_NaN();
  return baseline_ms / candidate_ms;
}

std::optional<size_t> pick_best(std::span<const Candidate> candidates, MetricKind kind) {
  std::optional<size_t> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!c.ok || std::isnan(c.metric)) continue;
    if (!best || better(c.metric, candidates[*best].metric, kind)) best = i;
  }
  return best;
}

std::optional<BatchPoint> best_within_budget(std::span<const BatchPoint> points, double budget_ms) {
  std::optional<BatchPoint> best;
  for (const BatchPoint& p : points) {
    if (!(p.latency_ms <= budget_ms) || std::isnan(p.throughput_per_s)) continue;
    if (!best || p.throughput_per_s > best->throughput_per_s) best = p;
  }
  return best;
}

std::string budget_failure_message(double budget_ms) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "No backend satisfied latency budget %.3f ms", budget_ms);
  return buf;
}

}  // namespace aitune
