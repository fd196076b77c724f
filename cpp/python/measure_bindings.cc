#include "measure_bindings.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "errors.h"
#include "measure/measure_loop.h"
#include "measure/statistics.h"
#include "measure/stop_rules.h"
#include "measure/sweep.h"
#include "select/selection.h"
#include "select/tolerance.h"

namespace aitune::python {
namespace py = pybind11;

namespace {

// Dicts from Python are checked key by key so a typo raises instead of silently using a default.
void reject_unknown_keys(const py::dict& d, const char* what, std::initializer_list<const char*> known) {
  for (auto item : d) {
    const auto key = py::str(item.first).cast<std::string>();
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) throw_status(invalid_argument(std::string("Unknown key '") + key + "' in " + what));
  }
}

template <typename T>
T required(const py::dict& d, const char* what, const char* key) {
  if (!d.contains(key)) throw_status(invalid_argument(std::string("Missing key '") + key + "' in " + what));
  return d[key].cast<T>();
}

template <typename T>
T optional_key(const py::dict& d, const char* key, T fallback) {
  return d.contains(key) ? d[key].cast<T>() : fallback;
}

py::dict stats_dict(const LatencyStats& s) {
  py::dict d;
  d["mean"] = s.mean;
  d["median"] = s.median;
  d["p90"] = s.p90;
  d["p99"] = s.p99;
  d["min"] = s.min;
  d["max"] = s.max;
  d["std"] = s.std;
  d["cv"] = s.cv;
  return d;
}

MeasureStopRule stop_rule_from_dict(const py::dict& d) {
  const auto kind = required<std::string>(d, "measure stop rule", "kind");
  MeasureStopRule rule;
  if (kind == "fixed") {
    reject_unknown_keys(d, "fixed measure stop rule", {"kind", "num_steps", "warmup_samples"});
    FixedStepsRule r;
    r.num_steps = optional_key(d, "num_steps", r.num_steps);
    r.warmup_samples = optional_key(d, "warmup_samples", r.warmup_samples);
    rule = r;
  } else if (kind == "stable") {
    reject_unknown_keys(d, "stable measure stop rule",
                        {"kind", "window_size", "max_cv_ratio", "warmup_samples", "max_samples"});
    StableWindowRule r;
    r.window_size = optional_key(d, "window_size", r.window_size);
    r.max_cv_ratio = optional_key(d, "max_cv_ratio", r.max_cv_ratio);
    r.warmup_samples = optional_key(d, "warmup_samples", r.warmup_samples);
    r.max_samples = optional_key(d, "max_samples", r.max_samples);
    rule = r;
  } else {
    throw_status(
        invalid_argument("Unknown measure stop rule kind '" + kind + "'; expected 'fixed' or 'stable'"));
  }
  ok_or_throw(validate_stop_rule(rule));
  return rule;
}

void put_stats(py::dict& d, const char* prefix, const char* cv_key, const std::optional<LatencyStats>& s) {
  const std::string p(prefix);
  auto value = [&](double LatencyStats::*member) -> py::object {
    return s ? py::object(py::float_((*s).*member)) : py::object(py::none());
  };
  d[py::str(p + "mean")] = value(&LatencyStats::mean);
  d[py::str(p + "median")] = value(&LatencyStats::median);
  d[py::str(p + "p90")] = value(&LatencyStats::p90);
  d[py::str(p + "p99")] = value(&LatencyStats::p99);
  d[py::str(p + "min")] = value(&LatencyStats::min);
  d[py::str(p + "max")] = value(&LatencyStats::max);
  d[py::str(p + "std")] = value(&LatencyStats::std);
  d[cv_key] = value(&LatencyStats::cv);
}

// docs/reference/measurement.md#batch-sweep field names, in the same order as to_json.
py::dict batch_result_dict(const BatchResult& r) {
  py::dict d;
  d["batch_size"] = r.batch_size;
  d["num_warmup_calls"] = r.num_warmup_calls;
  d["num_measured_calls"] = r.num_measured_calls;
  put_stats(d, "host_latency_ms_", "host_latency_cv", r.host_latency_ms);
  put_stats(d, "device_time_ms_", "device_time_cv", r.device_time_ms);
  d["throughput_per_s"] = r.throughput_per_s;
  return d;
}

NumericTolerance tolerance_from_dict(const py::dict& d) {
  const char* what = "numeric tolerance";
  reject_unknown_keys(
      d, what, {"atol", "rtol", "max_rel_l2", "max_mismatch_fraction", "max_noise_ratio", "noise_floor"});
  return {required<double>(d, what, "atol"),
          required<double>(d, what, "rtol"),
          required<double>(d, what, "max_rel_l2"),
          required<double>(d, what, "max_mismatch_fraction"),
          optional_key<double>(d, "max_noise_ratio", 0.0),
          optional_key<double>(d, "noise_floor", 0.0)};
}

py::dict tolerance_dict(const NumericTolerance& t) {
  py::dict d;
  d["atol"] = t.atol;
  d["rtol"] = t.rtol;
  d["max_rel_l2"] = t.max_rel_l2;
  d["max_mismatch_fraction"] = t.max_mismatch_fraction;
  d["max_noise_ratio"] = t.max_noise_ratio;
  d["noise_floor"] = t.noise_floor;
  return d;
}

// has_nan and numel may be left out (a leaf without NaN, size unknown); the errors may not.
LeafMetrics leaf_metrics_from_dict(const py::dict& d) {
  const char* what = "leaf metrics";
  reject_unknown_keys(d, what,
                      {"max_abs_error", "max_rel_error", "rel_l2_error", "mismatch_fraction", "has_nan",
                       "numel", "rel_l2_vs_precise", "eager_rel_l2_vs_precise"});
  return {required<double>(d, what, "max_abs_error"),
          required<double>(d, what, "max_rel_error"),
          required<double>(d, what, "rel_l2_error"),
          required<double>(d, what, "mismatch_fraction"),
          optional_key<bool>(d, "has_nan", false),
          optional_key<int64_t>(d, "numel", 0),
          optional_key<double>(d, "rel_l2_vs_precise", -1.0),
          optional_key<double>(d, "eager_rel_l2_vs_precise", -1.0)};
}

MetricKind metric_kind_from_name(const std::string& kind) {
  if (kind == "throughput") return MetricKind::kThroughput;
  if (kind == "latency") return MetricKind::kLatency;
  throw_status(invalid_argument("Unknown metric kind '" + kind + "'; expected 'throughput' or 'latency'"));
}

SweepState make_sweep_state(const std::string& rule_name, double min_gain, int backoff_limit) {
  SweepRule rule;
  if (rule_name == "saturated") {
    rule = ThroughputSaturatedRule{min_gain, backoff_limit};
  } else if (rule_name == "all") {
    rule = AllSamplesRule{};
  } else {
    throw_status(invalid_argument("Unknown sweep rule '" + rule_name + "'; expected 'saturated' or 'all'"));
  }
  ok_or_throw(validate_sweep_rule(rule));
  return SweepState(rule);
}

py::dict measure_batch_py(const py::function& call, int64_t batch_size, const py::dict& rule_dict) {
  const MeasureStopRule rule = stop_rule_from_dict(rule_dict);
  // A Python exception from `call` (e.g. torch.OutOfMemoryError) propagates unchanged through
  // the core loop, which holds only RAII state.
  auto timed_call = [&](size_t index) -> StatusOr<CallTiming> {
    py::object out = call(index);
    auto t = out.cast<py::sequence>();
    if (t.size() != 2) {
      return invalid_argument("measure_batch: call must return (host_ns, device_ms or None), got " +
                              py::repr(out).cast<std::string>());
    }
    CallTiming timing;
    timing.host_ns = t[0].cast<double>();
    if (!t[1].is_none()) timing.device_ms = t[1].cast<double>();
    return timing;
  };
  StatusOr<BatchResult> result = measure_batch(batch_size, rule, timed_call);
  if (!result.ok()) {
    // kBackendError only comes from the stable-window rule giving up; docs/reference/errors.md raises it as a
    // plain RuntimeError with the rule's message.
    if (result.status().code() == StatusCode::kBackendError)
      throw std::runtime_error(result.status().message());
    throw_status(result.status());
  }
  return batch_result_dict(*result);
}

}  // namespace

void register_measure_bindings(py::module_& m) {
  m.def(
      "compute_stats", [](const std::vector<double>& values) { return stats_dict(compute_stats(values)); },
      py::arg("values"), "mean, median, p90, p99, min, max, std (population) and cv of `values`.");
  m.def(
      "percentile",
      [](std::vector<double> values, double q) {
        std::sort(values.begin(), values.end());
        return percentile(std::move(values), q);
      },
      py::arg("values"), py::arg("q"), "numpy.percentile(values, q) with the default linear method.");
  m.def("default_batch_sizes", &default_batch_sizes, py::arg("max_batch_size") = 0,
        "1, 2, 4, ..., 2**20, capped at max_batch_size when it is > 0.");

  py::class_<SweepState>(m, "SweepState")
      .def(py::init(&make_sweep_state), py::kw_only(), py::arg("rule") = "saturated",
           py::arg("min_throughput_gain_ratio") = 0.05, py::arg("throughput_backoff_limit") = 2)
      .def("add", &SweepState::add, py::arg("batch_size"), py::arg("throughput_per_s"),
           "Record a measured batch size; True when the sweep should stop.")
      .def_property_readonly("best_batch_size", &SweepState::best_batch_size)
      .def_property_readonly("best_throughput", &SweepState::best_throughput);

  m.def("passes_first_wins_gate", &passes_first_wins_gate, py::arg("speedup"), py::arg("threshold_percent"));
  m.def(
      "first_wins_gate",
      [](const std::vector<double>& speedups, double threshold_percent) {
        const GateVerdict v = first_wins_gate(speedups, threshold_percent);
        py::dict d;
        d["passed"] = v.passed;
        d["geomean_speedup"] = v.geomean_speedup;
        d["worst_speedup"] = v.worst_speedup;
        d["worst_index"] = v.worst_index;
        d["too_slow_somewhere"] = v.too_slow_somewhere;
        return d;
      },
      py::arg("speedups"), py::arg("threshold_percent"),
      "The gate over the caller's batch sizes: passed, geomean_speedup, worst_speedup, worst_index, "
      "too_slow_somewhere.");
  m.attr("MAX_GATE_SLOWDOWN") = kMaxGateSlowdown;
  m.def("passes_profiling_gate", &passes_profiling_gate, py::arg("speedup"), py::arg("threshold_percent"));
  m.def("speedup_throughput", &speedup_throughput, py::arg("candidate"), py::arg("baseline"));
  m.def("speedup_latency", &speedup_latency, py::arg("candidate_ms"), py::arg("baseline_ms"));

  m.def(
      "pick_best",
      [](const std::vector<std::tuple<std::string, bool, double>>& items, const std::string& kind) {
        std::vector<Candidate> candidates;
        candidates.reserve(items.size());
        for (const auto& [name, ok, metric] : items) candidates.push_back({name, ok, metric});
        return pick_best(candidates, metric_kind_from_name(kind));
      },
      py::arg("candidates"), py::arg("kind"),
      "Index of the best ok (name, ok, metric) candidate, first of ties, or None.");
  m.def(
      "best_within_budget",
      [](const std::vector<std::tuple<int64_t, double, double>>& items,
         double budget_ms) -> std::optional<std::tuple<int64_t, double, double>> {
        std::vector<BatchPoint> points;
        points.reserve(items.size());
        for (const auto& [bs, latency_ms, throughput] : items) points.push_back({bs, latency_ms, throughput});
        auto best = best_within_budget(points, budget_ms);
        if (!best) return std::nullopt;
        return std::make_tuple(best->batch_size, best->latency_ms, best->throughput_per_s);
      },
      py::arg("points"), py::arg("budget_ms"),
      "The (batch_size, latency_ms, throughput_per_s) with the highest throughput within budget, or None.");
  m.def("budget_failure_message", &budget_failure_message, py::arg("budget_ms"));

  m.def(
      "default_tolerance",
      [](const std::string& name) {
        return tolerance_dict(default_tolerance(value_or_throw(precision_class_from_name(name))));
      },
      py::arg("precision_class"));
  m.def(
      "leaf_passes",
      [](const py::dict& metrics, const py::dict& tolerance) {
        return leaf_passes(leaf_metrics_from_dict(metrics), tolerance_from_dict(tolerance));
      },
      py::arg("metrics"), py::arg("tolerance"));
  m.def(
      "deciding_bound",
      [](const py::dict& metrics, const py::dict& tolerance) {
        return std::string(deciding_bound(leaf_metrics_from_dict(metrics), tolerance_from_dict(tolerance)));
      },
      py::arg("metrics"), py::arg("tolerance"),
      "Which bound decided a leaf's verdict: 'nan', 'max_rel_l2' or 'max_mismatch_fraction'.");
  m.def(
      "numeric_failure_message",
      [](const std::string& path, size_t sample_index, const py::dict& metrics, const py::dict& tolerance,
         const std::string& precision_class) {
        return numeric_failure_message(path, sample_index, leaf_metrics_from_dict(metrics),
                                       tolerance_from_dict(tolerance),
                                       value_or_throw(precision_class_from_name(precision_class)));
      },
      py::arg("path"), py::arg("sample_index"), py::arg("metrics"), py::arg("tolerance"),
      py::arg("precision_class"));

  m.def("measure_batch", &measure_batch_py, py::arg("call"), py::arg("batch_size"), py::arg("rule"),
        "Call call(i) -> (host_ns, device_ms or None) until the stop rule stops; the sweep's result fields.");
}

}  // namespace aitune::python
