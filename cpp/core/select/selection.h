// Backend selection rules of docs/reference/strategies.md#selection-and-the-gate as pure functions: the
// performance gates, speedups, best-candidate choice and the latency-budget pick. Strategies (Python) own the
// flow; these own the comparisons, so boundary behaviour (ties, exact thresholds) is tested once here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace aitune {

enum class MetricKind {
  kThroughput,  // samples/s, higher is better
  kLatency,     // ms, lower is better
};

// FirstWins / OneBackend: passes when speedup >= 1 + threshold/100 (1.01 by default). The
// 1e-12 slack lets a speedup computed as exactly 1.01 pass despite 1 + 1/100 rounding above it.
bool passes_first_wins_gate(double speedup, double threshold_percent);

// FirstWins / OneBackend at the caller's batch sizes (docs/guide.md, "The performance gate"):
// the candidate passes when the geometric mean of its per-size speedups (candidate ÷ eager
// throughput) passes passes_first_wins_gate and no size is slower than eager by more than
// kMaxGateSlowdown. An empty list or a NaN speedup fails.
inline constexpr double kMaxGateSlowdown = 0.03;
struct GateVerdict {
  bool passed = false;
  double geomean_speedup = 0.0;  // NaN when the list is empty or holds a NaN
  double worst_speedup = 0.0;
  size_t worst_index = 0;           // index of worst_speedup in the list
  bool too_slow_somewhere = false;  // some size is > kMaxGateSlowdown slower than eager
};
GateVerdict first_wins_gate(std::span<const double> speedups, double threshold_percent);

// Profiling strategies: the winner must strictly beat 1 + threshold/100 (ties go to eager).
bool passes_profiling_gate(double speedup, double threshold_percent);

// candidate / baseline; NaN unless both are positive. The caller decides what a failed
// baseline means (docs/reference/strategies.md#selection-and-the-gate accepts the candidate then).
double speedup_throughput(double candidate_per_s, double baseline_per_s);

// baseline / candidate (lower latency is better); NaN unless both are positive.
double speedup_latency(double candidate_ms, double baseline_ms);

struct Candidate {
  std::string name;
  bool ok = false;  // built, correct and measured
  double metric = 0.0;
};

// Index of the best ok candidate; only a strictly better metric replaces the current best, so
// the first of equal candidates wins. NaN metrics are skipped. nullopt when none is usable.
std::optional<size_t> pick_best(std::span<const Candidate> candidates, MetricKind kind);

struct BatchPoint {
  int64_t batch_size = 0;
  double latency_ms = 0.0;  // mean host latency
  double throughput_per_s = 0.0;
};

// LatencyBudgetStrategy: the highest-throughput point with latency_ms <= budget_ms (first wins
// ties); nullopt when no point is within budget.
std::optional<BatchPoint> best_within_budget(std::span<const BatchPoint> points, double budget_ms);

// "No backend satisfied latency budget 10.000 ms" (docs/reference/errors.md).
std::string budget_failure_message(double budget_ms);

}  // namespace aitune
