// Bindings for the libtorch runtime pieces: numeric comparison
// (docs/reference/validation.md#numeric-comparison), one timed call
// (docs/reference/measurement.md#one-measured-call) and the CUDA-graph runner
// (docs/reference/dispatch.md#cuda-graph-runner) around a Python callable.
#pragma once

#include <pybind11/pybind11.h>

namespace aitune::python {

void register_torch_runtime_bindings(pybind11::module_& m);

}  // namespace aitune::python
