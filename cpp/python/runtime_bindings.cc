#include "runtime_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor casters

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "runtime/runtime.h"

namespace aitune::python {
namespace py = pybind11;
namespace {

// A Python value of an input dict -> the runtime's Value (tensors, bool, int, float, str, None).
Value to_value(const std::string& key, const py::handle& value) {
  if (value.is_none()) return std::monostate{};
  if (THPVariable_Check(value.ptr())) return THPVariable_Unpack(value.ptr());
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) return value.cast<int64_t>();
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  throw py::type_error("input '" + key + "' must be a tensor, bool, int, float, str or None, got " +
                       std::string(py::str(py::type::of(value).attr("__qualname__"))));
}

Inputs to_inputs(const py::dict& inputs) {
  Inputs out;
  for (auto item : inputs) {
    const std::string key = item.first.cast<std::string>();
    out.emplace(key, to_value(key, item.second));
  }
  return out;
}

py::list to_list(Outputs outputs) {
  py::list result;
  for (auto& [path, tensor] : outputs.items) result.append(py::make_tuple(path, std::move(tensor)));
  return result;
}

py::dict graph_info(const GraphInfo& g) {
  py::dict d;
  d["name"] = g.name;
  d["backend_name"] = g.backend_name;
  d["native"] = g.native;
  d["not_native_reason"] = g.not_native_reason;
  d["input_order"] = g.input_order;
  d["output_paths"] = g.output_paths;
  d["cuda_graphs"] = g.cuda_graphs;
  return d;
}

// A module of a loaded Runtime, holding the Runtime alive. ModuleHandle itself is not bound: it
// is owned by its Runtime and is not a complete type outside runtime.cc.
struct RuntimeModule {
  std::shared_ptr<const Runtime> runtime;
  const ModuleHandle* handle;
};

}  // namespace

void register_runtime_bindings(py::module_& m) {
  py::class_<RuntimeModule>(m, "RuntimeModule", "A module of a checkpoint loaded by the C++ Runtime.")
      .def_property_readonly("name", [](const RuntimeModule& r) { return r.handle->name(); })
      .def_property_readonly("graphs",
                             [](const RuntimeModule& r) {
                               py::list graphs;
                               for (const GraphInfo& g : r.handle->graphs()) graphs.append(graph_info(g));
                               return graphs;
                             })
      .def(
          "run",
          [](const RuntimeModule& r, const py::dict& inputs) {
            Inputs values = to_inputs(inputs);
            std::optional<StatusOr<Outputs>> outputs;
            {
              py::gil_scoped_release release;  // ModuleHandle::run is thread-safe and needs no Python
              outputs.emplace(r.handle->run(values));
            }
            return to_list(value_or_throw(std::move(*outputs)));
          },
          py::arg("inputs"),
          "Selects the graph by the inputs' names and ranks, checks them and runs it: [(access path, "
          "tensor)].")
      .def(
          "select_graph",
          [](const RuntimeModule& r, const py::dict& inputs) {
            return value_or_throw(r.handle->select_graph(to_inputs(inputs)));
          },
          py::arg("inputs"))
      .def(
          "cuda_graph_counters",
          [](const RuntimeModule& r, const std::string& graph) -> py::object {
            const std::optional<CudaGraphCounters> counters = r.handle->cuda_graph_counters(graph);
            if (!counters) return py::none();
            py::dict d;
            d["hits"] = counters->hits;
            d["misses"] = counters->misses;
            d["captures"] = counters->captures;
            d["capture_failures"] = counters->capture_failures;
            d["direct_calls"] = counters->direct_calls;
            return d;
          },
          py::arg("graph"));

  py::class_<Runtime, std::shared_ptr<Runtime>>(
      m, "Runtime", "The C++ runtime over one checkpoint (docs/reference/native.md#runtime-api).")
      .def_static(
          "load",
          [](const std::string& path, int device_index, const std::string& cache_dir, bool allow_incompatible,
             std::optional<bool> cuda_graphs) {
            LoadOptions options;
            options.device_index = device_index;
            options.cache_dir = cache_dir;
            options.allow_incompatible = allow_incompatible;
            options.cuda_graphs.enabled = cuda_graphs;
            std::optional<StatusOr<std::unique_ptr<Runtime>>> loaded;
            {
              py::gil_scoped_release release;  // reads, verifies and extracts the archive
              loaded.emplace(Runtime::load(path, options));
            }
            return std::shared_ptr<Runtime>(value_or_throw(std::move(*loaded)));
          },
          py::arg("path"), py::arg("device_index") = -1, py::arg("cache_dir") = "",
          py::arg("allow_incompatible") = false, py::arg("cuda_graphs") = py::none(),
          "Loads a .ait checkpoint; device_index -1 serves on the CPU. cuda_graphs None: as saved.")
      .def("modules", &Runtime::modules)
      .def(
          "module",
          [](const std::shared_ptr<Runtime>& r, const std::string& name) {
            return RuntimeModule{r, value_or_throw(r->module(name))};
          },
          py::arg("name"))
      .def_property_readonly("path", &Runtime::path);
}

}  // namespace aitune::python
