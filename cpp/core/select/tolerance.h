// Numeric comparison with eager (docs/reference/validation.md): precision classes, their default
// tolerances, the per-leaf pass rule and the failure message. The metrics themselves are
// computed on the device by the torch layer; this file only judges them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace aitune {

// The lowest precision a candidate involves; ordered from strictest to loosest.
enum class PrecisionClass { kFp32, kTf32, kFp16, kBf16, kInt8, kFp8 };

// "fp32", "tf32", "fp16", "bf16", "int8", "fp8": the names used in logs, telemetry and
// set_tolerance(...) keys.
const char* precision_class_name(PrecisionClass precision);
// Inverse of precision_class_name (exact, lower case); kInvalidArgument otherwise.
StatusOr<PrecisionClass> precision_class_from_name(std::string_view name);

struct NumericTolerance {
  double atol = 0.0;
  double rtol = 0.0;
  double max_rel_l2 = 0.0;
  double max_mismatch_fraction = 0.0;  // share of elements in [0, 1]
  // The noise bound (docs/reference/validation.md#the-noise-bound): against a float32 reference
  // computed without TF32, the candidate's rel_l2 may be at most max_noise_ratio times eager's
  // own rel_l2 plus noise_floor. 0 switches the bound off.
  double max_noise_ratio = 0.0;
  double noise_floor = 0.0;
};

// DEFAULT_TOLERANCES of docs/reference/validation.md#numeric-comparison.
NumericTolerance default_tolerance(PrecisionClass precision);

// One output leaf of one sample, candidate vs eager reference.
struct LeafMetrics {
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;
  double rel_l2_error = 0.0;
  double mismatch_fraction = 0.0;  // share in [0, 1]
  bool has_nan = false;            // any NaN in the candidate output
  int64_t numel = 0;
  // Against the float32 reference computed without TF32 (negative: not measured, so the noise
  // bound does not apply): the candidate's rel_l2, and eager's own.
  double rel_l2_vs_precise = -1.0;
  double eager_rel_l2_vs_precise = -1.0;
};

// True when the noise bound applies: the tolerance has one and both precise metrics were measured.
bool noise_bound_applies(const LeafMetrics& metrics, const NumericTolerance& tolerance);
// max_noise_ratio * eager_rel_l2_vs_precise + noise_floor (meaningful when the bound applies).
double noise_limit(const LeafMetrics& metrics, const NumericTolerance& tolerance);

// NaN never passes; otherwise rel_l2 <= max_rel_l2, mismatch_fraction <= max_mismatch_fraction
// and, where it applies, rel_l2_vs_precise <= noise_limit.
bool leaf_passes(const LeafMetrics& metrics, const NumericTolerance& tolerance);

// Which bound decided the leaf's verdict: "nan" (NaN never passes), "max_rel_l2",
// "max_mismatch_fraction" or "noise". When some bounds pass and others fail, the failing one
// that uses the largest share of its limit; when all agree, the one closer to (or further past)
// its limit, as a share of that limit.
const char* deciding_bound(const LeafMetrics& metrics, const NumericTolerance& tolerance);

// The CorrectnessNumericError text of docs/reference/validation.md#reporting for a leaf that failed
// leaf_passes; names the check that failed (NaN, rel_l2, or the mismatch share).
std::string numeric_failure_message(std::string_view access_path, size_t sample_index,
                                    const LeafMetrics& metrics, const NumericTolerance& tolerance,
                                    PrecisionClass precision);

}  // namespace aitune
