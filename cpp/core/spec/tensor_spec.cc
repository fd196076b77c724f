#include "spec/tensor_spec.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace aitune {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Size ÷ batch size. A missing or non-positive batch size means "unknown" (JIT mode), which
// must never make an axis a batch axis, hence NaN rather than a division by zero.
double axis_multiplier(int64_t size, std::optional<int64_t> batch_size) {
  if (!batch_size.has_value() || *batch_size <= 0) return kNaN;
  return static_cast<double>(size) / static_cast<double>(*batch_size);
}

// NaN and infinities fail both tests, so an unknown multiplier never qualifies.
bool is_integral(double value) { return std::isfinite(value) && std::floor(value) == value; }

}  // namespace

TensorSpec TensorSpec::from_sample(Shape shape, std::string dtype, std::optional<int64_t> batch_size) {
  TensorSpec spec;
  spec.kinds_.assign(shape.size(), AxisKind::kStatic);
  spec.multipliers_.reserve(shape.size());
  for (int64_t size : shape) spec.multipliers_.push_back(axis_multiplier(size, batch_size));
  spec.min_shape_ = shape;
  spec.max_shape_ = std::move(shape);
  spec.dtype_ = std::move(dtype);
  return spec;
}

StatusOr<TensorSpec> TensorSpec::from_parts(std::vector<AxisKind> kinds, Shape min_shape, Shape max_shape,
                                            std::vector<double> multipliers, std::string dtype) {
  const size_t rank = kinds.size();
  AITUNE_CHECK_ARG(min_shape.size() == rank && max_shape.size() == rank && multipliers.size() == rank,
                   "Tensor spec parts must have one entry per axis, got " + std::to_string(rank) +
                       " kinds, " + std::to_string(min_shape.size()) + " min sizes, " +
                       std::to_string(max_shape.size()) + " max sizes and " +
                       std::to_string(multipliers.size()) + " multipliers");
  for (size_t axis = 0; axis < rank; ++axis) {
    const std::string where = "Tensor spec axis " + std::to_string(axis) + " ";
    AITUNE_CHECK_ARG(min_shape[axis] >= 0,
                     where + "has a negative min size " + std::to_string(min_shape[axis]));
    AITUNE_CHECK_ARG(min_shape[axis] <= max_shape[axis],
                     where + "must satisfy min <= max, got min=" + std::to_string(min_shape[axis]) +
                         ", max=" + std::to_string(max_shape[axis]));
    AITUNE_CHECK_ARG(kinds[axis] != AxisKind::kStatic || min_shape[axis] == max_shape[axis],
                     where + "is static but has min=" + std::to_string(min_shape[axis]) +
                         " != max=" + std::to_string(max_shape[axis]));
    // max_batch_size() divides by the multiplier of a batch axis.
    AITUNE_CHECK_ARG(
        kinds[axis] != AxisKind::kBatch || (is_integral(multipliers[axis]) && multipliers[axis] >= 1),
        where + "is a batch axis but its multiplier " + std::to_string(multipliers[axis]) +
            " is not a positive integer");
  }
  TensorSpec spec;
  spec.kinds_ = std::move(kinds);
  spec.min_shape_ = std::move(min_shape);
  spec.max_shape_ = std::move(max_shape);
  spec.multipliers_ = std::move(multipliers);
  spec.dtype_ = std::move(dtype);
  return spec;
}

Status TensorSpec::update(const Shape& shape, std::optional<int64_t> batch_size) {
  AITUNE_CHECK_ARG(static_cast<int64_t>(shape.size()) == rank(),
                   "Cannot add a sample of rank " + std::to_string(shape.size()) + " (shape " +
                       format_shape(shape) + ") to a tensor recorded with rank " + std::to_string(rank()) +
                       " (shape " + symbolic_shape() + ")");
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    const int64_t size = shape[axis];
    AxisKind& kind = kinds_[axis];
    // A static axis has min == max == its first-seen size; it only changes when that differs.
    if (kind == AxisKind::kStatic && size == min_shape_[axis]) continue;
    min_shape_[axis] = std::min(min_shape_[axis], size);
    max_shape_[axis] = std::max(max_shape_[axis], size);
    if (kind == AxisKind::kDynamic) continue;  // never promoted back to batch
    const double multiplier = axis_multiplier(size, batch_size);
    if (multipliers_[axis] == multiplier && is_integral(multiplier)) {
      kind = AxisKind::kBatch;
    } else {
      kind = AxisKind::kDynamic;
      multipliers_[axis] = kNaN;
    }
  }
  return Status::Ok();
}

Status TensorSpec::extend_max(const Shape& shape) {
  AITUNE_CHECK_ARG(static_cast<int64_t>(shape.size()) == rank(),
                   "Cannot extend max shape " + format_shape(max_shape_) + " (rank " +
                       std::to_string(rank()) + ") with shape " + format_shape(shape) + " (rank " +
                       std::to_string(shape.size()) + ")");
  for (size_t axis = 0; axis < shape.size(); ++axis)
    max_shape_[axis] = std::max(max_shape_[axis], shape[axis]);
  return Status::Ok();
}

std::vector<std::pair<int64_t, int64_t>> TensorSpec::batch_multipliers() const {
  std::vector<std::pair<int64_t, int64_t>> result;
  for (size_t axis = 0; axis < kinds_.size(); ++axis) {
    if (kinds_[axis] == AxisKind::kBatch) {
      result.emplace_back(static_cast<int64_t>(axis), static_cast<int64_t>(multipliers_[axis]));
    }
  }
  return result;
}

bool TensorSpec::has_batch_axis() const {
  return std::find(kinds_.begin(), kinds_.end(), AxisKind::kBatch) != kinds_.end();
}

bool TensorSpec::has_dynamic_axis() const {
  return std::any_of(kinds_.begin(), kinds_.end(), [](AxisKind kind) { return kind != AxisKind::kStatic; });
}

std::optional<int64_t> TensorSpec::max_batch_size() const {
  std::optional<int64_t> result;
  for (const auto& [axis, multiplier] : batch_multipliers()) {
    const int64_t value = max_shape_[static_cast<size_t>(axis)] / multiplier;
    result = result.has_value() ? std::max(*result, value) : value;
  }
  return result;
}

std::optional<int64_t> TensorSpec::min_batch_size() const {
  std::optional<int64_t> result;
  for (const auto& [axis, multiplier] : batch_multipliers()) {
    const int64_t value = min_shape_[static_cast<size_t>(axis)] / multiplier;
    result = result.has_value() ? std::min(*result, value) : value;
  }
  return result;
}

Shape TensorSpec::batched_shape(const Shape& sample_shape, int64_t batch_size) const {
  Shape result = sample_shape;
  for (const auto& [axis, multiplier] : batch_multipliers()) {
    if (static_cast<size_t>(axis) < result.size())
      result[static_cast<size_t>(axis)] = multiplier * batch_size;
  }
  return result;
}

bool TensorSpec::matches(const Shape& shape) const {
  if (static_cast<int64_t>(shape.size()) != rank()) return false;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (kinds_[axis] == AxisKind::kStatic && shape[axis] != min_shape_[axis]) return false;
  }
  return true;
}

std::string TensorSpec::axis_label(int64_t axis) const {
  switch (axis_kind(axis)) {
    case AxisKind::kBatch: return "batch" + std::to_string(axis);
    case AxisKind::kDynamic: return "dim" + std::to_string(axis);
    case AxisKind::kStatic: break;
  }
  return std::to_string(min_shape_.at(static_cast<size_t>(axis)));
}

std::string TensorSpec::symbolic_shape() const {
  std::string text = "[";
  for (int64_t axis = 0; axis < rank(); ++axis) {
    if (axis > 0) text += ", ";
    if (axis_kind(axis) == AxisKind::kStatic) {
      text += axis_label(axis);
    } else {
      text += '\'' + axis_label(axis) + '\'';
    }
  }
  text += ']';
  return text;
}

}  // namespace aitune
