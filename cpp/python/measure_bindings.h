// Bindings of the torch-free measurement and selection rules (cpp/core/measure, cpp/core/select)
// so Python strategies and the C++ runtime share one implementation of each rule.
#pragma once

#include <pybind11/pybind11.h>

namespace aitune::python {

// Adds compute_stats, percentile, default_batch_sizes, SweepState, the gates and speedups,
// pick_best, best_within_budget, budget_failure_message, default_tolerance, leaf_passes,
// numeric_failure_message and measure_batch to `m`.
void register_measure_bindings(pybind11::module_& m);

}  // namespace aitune::python
