// Bindings of the pure-C++ runtime (docs/reference/native.md#runtime-api) as `_C.Runtime`, so one serving
// test suite drives both runtimes from Python (tests/e2e/test_serving_runtimes.py): the Python dispatcher and
// the C++ `Runtime` serve the same checkpoint, and their outputs and errors are compared.
#pragma once

#include <pybind11/pybind11.h>

namespace aitune::python {

void register_runtime_bindings(pybind11::module_& m);

}  // namespace aitune::python
