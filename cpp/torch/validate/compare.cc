#include "validate/compare.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "bridge/tensor_bridge.h"

namespace aitune {
namespace {

std::string shape_text(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << ']';
  return out.str();
}

bool is_integer_like(const at::Tensor& t) { return !t.is_floating_point() && !t.is_complex(); }

// Indices into the one host copy of all reductions (a single device sync per leaf).
enum Slot : int64_t { kMaxAbs, kMaxRel, kDiffNorm, kRefNorm, kMismatches, kNan, kNumSlots };

}  // namespace

StatusOr<TensorMetrics> compare_tensors(const at::Tensor& candidate, const at::Tensor& reference, double atol,
                                        double rtol, bool use_fp64, double atol_rms_scale) {
  AITUNE_CHECK_ARG(candidate.defined() && reference.defined(),
                   "numeric comparison: candidate and reference must both be defined tensors");
  AITUNE_CHECK_ARG(atol >= 0.0 && rtol >= 0.0 && atol_rms_scale >= 0.0,
                   "numeric comparison: tolerances must be non-negative; got atol=" + std::to_string(atol) +
                       ", rtol=" + std::to_string(rtol) +
                       ", atol_rms_scale=" + std::to_string(atol_rms_scale));
  if (candidate.sizes() != reference.sizes()) {
    return invalid_argument("numeric comparison: output shape differs from the eager reference; expected " +
                            shape_text(reference.sizes()) + ", got " + shape_text(candidate.sizes()));
  }

  TensorMetrics m;
  m.numel = candidate.numel();
  m.candidate_dtype = dtype_name(candidate.scalar_type());
  m.reference_dtype = dtype_name(reference.scalar_type());
  m.dtype_differs = candidate.scalar_type() != reference.scalar_type();
  if (m.numel == 0) return m;

  try {
    at::NoGradGuard no_grad;
    const bool complex = candidate.is_complex() || reference.is_complex();
    const c10::ScalarType compute =
        complex ? (use_fp64 ? at::kComplexDouble : at::kComplexFloat) : (use_fp64 ? at::kDouble : at::kFloat);
    const at::Tensor ref_native = reference.to(candidate.device());
    const at::Tensor c = candidate.to(compute);
    const at::Tensor r = ref_native.to(compute);

    // Equal elements (equal infinities included) are zero error, not inf - inf = NaN.
    at::Tensor diff = (c - r).abs().masked_fill_(c == r, 0);
    const at::Tensor ref_abs = r.abs();
    // With atol == 0 and r == 0, 0/0 would be NaN for a matching element; it is zero error.
    const at::Tensor rel = (diff / ref_abs.clamp_min(atol)).masked_fill_(diff == 0, 0);
    // The band's absolute term on the leaf's scale: infinities would make the RMS infinite, so it
    // is taken over the finite elements (a 0-dim tensor: no extra device sync).
    const at::Tensor finite_abs = ref_abs.masked_fill(at::isfinite(ref_abs).logical_not(), 0);
    const at::Tensor band_atol =
        (finite_abs.norm() * (atol_rms_scale / std::sqrt(static_cast<double>(m.numel)))).clamp_min(atol);
    const at::Tensor mismatched = is_integer_like(candidate) && is_integer_like(reference)
                                      ? at::ne(candidate, ref_native)
                                      : diff.le(ref_abs * rtol + band_atol).logical_not();  // NaN counts
    const at::Tensor nan_any = (candidate.is_floating_point() || candidate.is_complex())
                                   ? at::isnan(candidate).any()
                                   : at::zeros({}, candidate.options().dtype(at::kBool));

    const at::Tensor host =
        at::stack({diff.max().to(at::kDouble), rel.max().to(at::kDouble), diff.norm().to(at::kDouble),
                   ref_abs.norm().to(at::kDouble), mismatched.sum().to(at::kDouble), nan_any.to(at::kDouble)})
            .cpu();
    const auto v = host.accessor<double, 1>();
    static_assert(kNumSlots == 6);

    m.max_abs_error = v[kMaxAbs];
    m.max_rel_error = v[kMaxRel];
    const double floor = atol * std::sqrt(static_cast<double>(m.numel));
    const double denominator = std::max(v[kRefNorm], floor);
    if (denominator > 0.0) {
      m.rel_l2_error = v[kDiffNorm] / denominator;
    } else {
      m.rel_l2_error = v[kDiffNorm] == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
    }
    m.mismatch_fraction = v[kMismatches] / static_cast<double>(m.numel);
    m.has_nan = v[kNan] != 0.0;
    return m;
  } catch (const c10::Error& e) {
    return Status(StatusCode::kBackendError,
                  std::string("numeric comparison failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status(StatusCode::kBackendError, std::string("numeric comparison failed: ") + e.what());
  }
}

}  // namespace aitune
