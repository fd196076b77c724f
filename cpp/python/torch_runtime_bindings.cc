#include "torch_runtime_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor casters

#include <memory>
#include <optional>

#include "errors.h"
#include "measure/call_timer.h"
#include "py_callable_runner.h"
#include "runners/cuda_graph_runner.h"
#include "validate/compare.h"

namespace aitune::python {
namespace py = pybind11;
namespace {

py::dict metrics_to_dict(const TensorMetrics& m) {
  py::dict d;
  d["max_abs_error"] = m.max_abs_error;
  d["max_rel_error"] = m.max_rel_error;
  d["rel_l2_error"] = m.rel_l2_error;
  d["mismatch_fraction"] = m.mismatch_fraction;
  d["has_nan"] = m.has_nan;
  d["numel"] = m.numel;
  d["dtype_differs"] = m.dtype_differs;
  d["candidate_dtype"] = m.candidate_dtype;
  d["reference_dtype"] = m.reference_dtype;
  return d;
}

py::dict stats_to_dict(const CudaGraphRunner::Stats& s) {
  py::dict d;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["captures"] = s.captures;
  d["evictions"] = s.evictions;
  d["capture_failures"] = s.capture_failures;
  d["direct_calls"] = s.direct_calls;
  d["in_graph_copies"] = s.in_graph_copies;
  return d;
}

CudaGraphOptions cuda_graph_options(size_t cache_size, bool clone_outputs, const py::object& enabled) {
  CudaGraphOptions options;
  options.cache_size = cache_size;
  options.clone_outputs = clone_outputs;
  // None: on unless AITUNE_DISABLE_CUDA_GRAPHS is set. The kill switch also wins over True (the
  // C++ runner reads it at construction).
  options.enabled =
      enabled.is_none() ? !CudaGraphRunner::cuda_graphs_disabled_by_env() : enabled.cast<bool>();
  return options;
}

}  // namespace

void register_torch_runtime_bindings(py::module_& m) {
  m.def(
      "compare_tensors",
      [](const at::Tensor& candidate, const at::Tensor& reference, double atol, double rtol, bool use_fp64,
         double atol_rms_scale) {
        StatusOr<TensorMetrics> metrics = [&] {
          py::gil_scoped_release release;  // device work and a device sync
          return compare_tensors(candidate, reference, atol, rtol, use_fp64, atol_rms_scale);
        }();
        return metrics_to_dict(value_or_throw(std::move(metrics)));
      },
      py::arg("candidate"), py::arg("reference"), py::arg("atol"), py::arg("rtol"),
      py::arg("use_fp64") = false, py::arg("atol_rms_scale") = 0.0,
      "Numeric metrics of one output leaf against its eager reference, as a dict.");

  m.def(
      "time_call",
      [](const py::function& fn, std::optional<int> cuda_device) {
        // fn is Python: the GIL stays held. A Python exception from fn is re-raised as is.
        std::optional<py::error_already_set> raised;
        StatusOr<TimedCall> timed = time_call(
            [&]() -> Status {
              try {
                fn();
                return Status::Ok();
              } catch (py::error_already_set& e) {
                raised.emplace(std::move(e));
                return Status(StatusCode::kBackendError, "the timed callable raised");
              }
            },
            cuda_device);
        if (raised) throw std::move(*raised);
        const TimedCall t = value_or_throw(std::move(timed));
        return py::make_tuple(t.host_ns,
                              t.device_ms ? py::object(py::float_(*t.device_ms)) : py::object(py::none()));
      },
      py::arg("fn"), py::arg("cuda_device") = py::none(),
      "Times one call of fn() under no_grad: (host_ns, device_ms or None).");

  py::class_<CudaGraphRunner, Runner, std::shared_ptr<CudaGraphRunner>>(m, "CudaGraphRunner")
      // A native runner (an AotiRunner) is wrapped as it is: no Python per call, captured or not.
      // Listed first: pybind tries overloads in order, and the callable form accepts any object.
      .def(py::init(
               [](std::shared_ptr<Runner> inner, size_t cache_size, bool clone_outputs, py::object enabled) {
                 if (!inner) throw py::value_error("CudaGraphRunner needs a runner to wrap, got None");
                 return std::make_shared<CudaGraphRunner>(
                     std::move(inner), cuda_graph_options(cache_size, clone_outputs, enabled));
               }),
           py::arg("fn"), py::arg("cache_size") = 8, py::arg("clone_outputs") = true,
           py::arg("enabled") = py::none())
      .def(py::init([](py::object fn, size_t cache_size, bool clone_outputs, py::object enabled) {
             return std::make_shared<CudaGraphRunner>(std::make_shared<PyCallableRunner>(std::move(fn)),
                                                      cuda_graph_options(cache_size, clone_outputs, enabled));
           }),
           py::arg("fn"), py::arg("cache_size") = 8, py::arg("clone_outputs") = true,
           py::arg("enabled") = py::none())
      .def(
          "run",
          [](CudaGraphRunner& runner, const std::vector<at::Tensor>& inputs) {
            StatusOr<std::vector<at::Tensor>> result = [&] {
              // The runner's mutex is taken without the GIL; PyCallableRunner takes it back.
              py::gil_scoped_release release;
              return runner.run(inputs);
            }();
            if (!result.ok()) {
              if (auto raised = PyCallableRunner::take_pending_error()) throw std::move(*raised);
              throw_status(result.status());
            }
            return std::move(result).value();
          },
          py::arg("inputs"),
          "Runs the wrapped runner (or fn(*inputs)) through CUDA graphs; returns the list of output tensors.")
      .def("stats", [](const CudaGraphRunner& r) { return stats_to_dict(r.stats()); })
      .def_property_readonly("last_warning", &CudaGraphRunner::last_warning)
      .def_property_readonly("num_cached_graphs", &CudaGraphRunner::num_cached_graphs)
      .def_property_readonly("cache_size", [](const CudaGraphRunner& r) { return r.options().cache_size; })
      .def_property_readonly("clone_outputs",
                             [](const CudaGraphRunner& r) { return r.options().clone_outputs; })
      .def_static("disabled_by_env", &CudaGraphRunner::cuda_graphs_disabled_by_env)
      .def("__repr__", &CudaGraphRunner::describe);
}

}  // namespace aitune::python
