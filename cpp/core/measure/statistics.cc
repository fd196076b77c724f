#include "measure/statistics.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace aitune {
namespace {

struct MeanStd {
  double mean = 0.0;
  double std = 0.0;
};

// Two passes instead of a running sum of squares: latencies in ns are ~1e6..1e9 with small
// spread, where sum(x^2) - n*mean^2 loses most significant digits.
MeanStd mean_std(std::span<const double> values) {
  if (values.empty()) return {};
  double sum = 0.0;
  for (double v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  double sq = 0.0;
  for (double v : values) sq += (v - mean) * (v - mean);
  return {mean, std::sqrt(sq / static_cast<double>(values.size()))};
}

double cv_of(const MeanStd& ms) { return ms.mean == 0.0 ? 0.0 : ms.std / ms.mean; }

double percentile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  q = std::clamp(q, 0.0, 100.0);
  const double index = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(index));
  const auto hi = static_cast<size_t>(std::ceil(index));
  const double frac = index - static_cast<double>(lo);
  // numpy's _lerp: interpolating from the nearer end keeps the result exact at both ends and
  // bit-identical to numpy.
  const double a = sorted[lo];
  const double b = sorted[hi];
  const double diff = b - a;
  return frac >= 0.5 ? b - diff * (1.0 - frac) : a + diff * frac;
}

}  // namespace

double percentile(std::vector<double> sorted_values, double q) { return percentile_sorted(sorted_values, q); }

double coefficient_of_variation(std::span<const double> values) { return cv_of(mean_std(values)); }

LatencyStats compute_stats(std::span<const double> values) {
  if (values.empty()) return {};
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const MeanStd ms = mean_std(values);
  LatencyStats stats;
  stats.mean = ms.mean;
  stats.std = ms.std;
  stats.cv = cv_of(ms);
  stats.median = percentile_sorted(sorted, 50.0);
  stats.p90 = percentile_sorted(sorted, 90.0);
  stats.p99 = percentile_sorted(sorted, 99.0);
  stats.min = sorted.front();
  stats.max = sorted.back();
  return stats;
}

}  // namespace aitune
