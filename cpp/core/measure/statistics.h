// Latency statistics of docs/reference/measurement.md#batch-sweep. Percentiles use numpy's default (linear)
// interpolation so numbers computed here and in Python reports agree to the last digit.
#pragma once

#include <span>
#include <vector>

namespace aitune {

// Unit-agnostic: the caller decides (ms for host latency and device time).
struct LatencyStats {
  double mean = 0.0;
  double median = 0.0;
  double p90 = 0.0;
  double p99 = 0.0;
  double min = 0.0;
  double max = 0.0;
  double std = 0.0;  // population standard deviation (numpy's default ddof=0)
  double cv = 0.0;   // std / mean; 0 when mean is 0
};

// All fields zero for an empty span.
LatencyStats compute_stats(std::span<const double> values);

// q in [0, 100] (clamped); `sorted_values` ascending. index = q/100 * (n-1), interpolated
// between its floor and ceil as numpy.percentile(method="linear"). 0 for an empty vector.
double percentile(std::vector<double> sorted_values, double q);

// Coefficient of variation (population std / mean) without the percentile work; the stable
// window rule evaluates it after every call.
double coefficient_of_variation(std::span<const double> values);

}  // namespace aitune
