// aitune._C: the pybind11 bindings (docs/design.md#layers). Registration only: the logic lives in
// cpp/core, cpp/torch and the flattener/dispatcher beside this file.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/headeronly/version.h>

#include "aoti_bindings.h"
#include "checkpoint_bindings.h"
#include "common/crash_report.h"
#include "dispatch_bindings.h"
#include "dispatcher.h"
#include "env/environment.h"
#include "errors.h"
#include "flatten.h"
#include "measure_bindings.h"
#include "runtime_bindings.h"
#include "signature.h"
#include "spec_bindings.h"
#include "torch_runtime_bindings.h"
#include "trt_profile_bindings.h"

namespace py = pybind11;
using namespace aitune;
using namespace aitune::python;

PYBIND11_MODULE(_C, m) {
  m.doc() = "aitune native core";
  m.attr("torch_version") = TORCH_VERSION;
  m.def("install_crash_report", &aitune::install_crash_report,
        "Native frames on a fatal signal, then the previous handler (faulthandler); AITUNE_CRASH_REPORT=1.");

  py::class_<Signature>(m, "Signature")
      .def(py::init<const py::list&>(), py::arg("params"))
      .def("to_list", &Signature::to_list)
      .def("bind", [](const Signature& sig, const py::tuple& args, const py::dict& kwargs) {
        std::vector<BoundArg> bound;
        sig.bind(args, kwargs, bound);
        py::dict out;
        for (const auto& b : bound) out[sig.params()[b.param].name_obj] = b.value;
        return out;
      });

  register_flatten_bindings(m);

  // Base of every native runner bound to Python (AotiRunner, CudaGraphRunner), so the
  // dispatcher can hold any of them.
  py::class_<Runner, std::shared_ptr<Runner>>(m, "Runner").def("describe", &Runner::describe);
  register_spec_bindings(m);
  register_measure_bindings(m);
  register_aoti_bindings(m);
  register_torch_runtime_bindings(m);
  register_checkpoint_bindings(m);
  register_trt_profile_bindings(m);
  register_runtime_bindings(m);
  register_dispatch_bindings(m);

  // One probe for both forms: probing loads and initialises the driver libraries.
  m.def("environment_report", [] {
    const EnvironmentInfo info = probe_environment();
    return py::make_tuple(to_json(info), to_text(info));
  });

  // Drop cached Python objects before the interpreter finalises.
  auto atexit = py::module_::import("atexit");
  atexit.attr("register")(py::cpp_function([] { clear_type_rules(); }));
}
