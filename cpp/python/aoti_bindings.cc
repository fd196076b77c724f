#include "aoti_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "runners/aoti_runner.h"

namespace aitune::python {
namespace py = pybind11;

void register_aoti_bindings(py::module_& m) {
  // The package metadata key the backend writes its input count under, which the runner reads.
  m.attr("AOTI_NUM_INPUTS_METADATA_KEY") = AotiRunner::kNumInputsMetadataKey;
  py::class_<AotiRunner, Runner, std::shared_ptr<AotiRunner>>(
      m, "AotiRunner", "Serves a model.pt2 AOTInductor package natively.")
      .def_static(
          "load",
          [](const std::string& package_path, int device_index) {
            std::optional<StatusOr<std::unique_ptr<AotiRunner>>> loaded;
            {
              py::gil_scoped_release no_gil;  // unpacks the archive and dlopens the model
              loaded.emplace(AotiRunner::load(package_path, device_index));
            }
            return std::shared_ptr<AotiRunner>(value_or_throw(std::move(*loaded)));
          },
          py::arg("package_path"), py::arg("device_index") = -1,
          "Loads a .pt2 package; device_index -1 means the CPU (or the current CUDA device for a CUDA "
          "package).")
      .def(
          "run",
          [](AotiRunner& runner, std::vector<at::Tensor> inputs) {
            std::optional<StatusOr<std::vector<at::Tensor>>> outputs;
            {
              // Native runners release the GIL before taking their mutex
              // (docs/reference/dispatch.md#threads-and-streams).
              py::gil_scoped_release no_gil;
              outputs.emplace(runner.run(inputs));
            }
            return value_or_throw(std::move(*outputs));
          },
          py::arg("inputs"), "Runs the package on its flat tensor inputs; returns its flat outputs.")
      .def("describe", &AotiRunner::describe)
      .def_property_readonly("package_path", &AotiRunner::package_path)
      .def_property_readonly("device", &AotiRunner::device)
      .def_property_readonly("device_index", &AotiRunner::device_index)
      .def_property_readonly("is_cuda", &AotiRunner::is_cuda)
      .def_property_readonly("num_inputs", &AotiRunner::num_inputs)
      .def_property_readonly("call_spec", &AotiRunner::call_spec)
      .def_property_readonly("metadata", &AotiRunner::metadata)
      .def("__repr__", &AotiRunner::describe);
}

}  // namespace aitune::python
