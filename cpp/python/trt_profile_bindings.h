// Bindings of the torch-free TensorRT profile rules (cpp/core/spec/trt_profiles.h): derivation,
// validation and per-call selection, used by aitune.torch.backend.tensorrt.
#pragma once

#include <pybind11/pybind11.h>

namespace aitune::python {

// Adds trt_single_profile, trt_samples_used_profiles, trt_dynamic_shapes_profile,
// trt_validate_profiles, trt_profile_envelope and TrtProfileSelector to `m`.
void register_trt_profile_bindings(pybind11::module_& m);

}  // namespace aitune::python
