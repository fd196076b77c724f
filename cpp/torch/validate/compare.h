// Numeric comparison of one output leaf against the eager reference
// (docs/reference/validation.md#numeric-comparison). The pass rule (tolerances per precision class, NaN never
// passes) belongs to the caller; this file only measures.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "common/status.h"

namespace aitune {

// Metrics of one leaf. Errors are in the leaf's units; fractions are in [0, 1]. All zero for
// empty tensors.
struct TensorMetrics {
  double max_abs_error = 0.0;  // max |c - r|
  double max_rel_error = 0.0;  // max |c - r| / max(|r|, atol)
  double rel_l2_error = 0.0;   // ||c - r||_2 / max(||r||_2, atol * sqrt(n))
  // Share of elements with |c - r| > band_atol + rtol * |r|, band_atol = max(atol, atol_rms_scale *
  // RMS of r's finite elements) (unequal, for integer leaves).
  double mismatch_fraction = 0.0;
  bool has_nan = false;  // any NaN in the candidate
  int64_t numel = 0;
  bool dtype_differs = false;   // reported, never a failure by itself
  std::string candidate_dtype;  // torch names without the prefix: "float16"
  std::string reference_dtype;
};

// Compares on the candidate's device (the reference is moved there) in float32, or float64 when
// `use_fp64` (the fp32 precision class). `atol_rms_scale` widens the mismatch band's absolute
// term to that share of the reference's RMS, so the elements near zero of a large-valued leaf are
// judged on the leaf's scale (docs/reference/validation.md#metrics); 0 keeps it at atol. Complex leaves are
// compared in the matching complex type, on magnitudes. When both leaves are integer or bool, the mismatch is
// the share of unequal elements and the other metrics use the values cast to float. Elements that are equal
// (including equal infinities) count as zero error. NaN differences count as mismatches and
// propagate into max_abs/max_rel/rel_l2.
// Errors: kInvalidArgument for an undefined tensor, a shape mismatch (naming both shapes) or a
// negative tolerance; kBackendError when torch fails (e.g. the device is out of memory).
StatusOr<TensorMetrics> compare_tensors(const at::Tensor& candidate, const at::Tensor& reference, double atol,
                                        double rtol, bool use_fp64, double atol_rms_scale = 0.0);

}  // namespace aitune
