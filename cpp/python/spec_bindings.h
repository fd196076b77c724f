// Bindings of the graph data model's native parts (cpp/core/spec): graph keys, tensor specs and
// the dynamic-dimension definitions.
#pragma once

#include <pybind11/pybind11.h>

namespace aitune::python {

// Adds GraphKey, TensorSpec, validate_dim_def, validate_shape_defs, check_call_against_defs,
// check_defs_observed and effective_shape to `m`.
void register_spec_bindings(pybind11::module_& m);

}  // namespace aitune::python
