// Bindings for the libtorch runtime pieces: numeric comparison (SPEC §7.2), one timed call
// (SPEC §8.1) and the CUDA-graph runner (SPEC §9.3) around a Python callable.
#pragma once

#include <pybind11/pybind11.h>

namespace aitune::python {

void register_torch_runtime_bindings(pybind11::module_& m);

}  // namespace aitune::python
