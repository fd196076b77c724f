// TensorSpec: what aitune knows about one tensor leaf of a graph after seeing its samples —
// the shape lattice of docs/reference/recording.md#dynamic-axes (static / batch<axis> / dim<axis>), min and
// max sizes, and the batch multiplier of every axis. Not thread-safe; owned by one graph.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "spec/shape.h"

namespace aitune {

enum class AxisKind { kStatic, kBatch, kDynamic };

class TensorSpec {
 public:
  TensorSpec() = default;

  // First sample of a leaf. `batch_size` is the batch size published by ait.tune for this call,
  // or nullopt when it is unknown (JIT mode): then every multiplier is NaN.
  static TensorSpec from_sample(Shape shape, std::string dtype, std::optional<int64_t> batch_size);

  // Rebuilds a spec from its saved parts (checkpoint manifest). `multipliers` uses NaN for
  // "no integral multiplier". Validates sizes and ranks.
  static StatusOr<TensorSpec> from_parts(std::vector<AxisKind> kinds, Shape min_shape, Shape max_shape,
                                         std::vector<double> multipliers, std::string dtype);

  // Adds a sample of the same leaf (docs/reference/recording.md#dynamic-axes): every axis whose size differs
  // from the first sample, or that is already symbolic, widens min/max; it becomes batch<axis> when the
  // stored and new multipliers are equal and a finite integer, otherwise dim<axis> with a NaN multiplier.
  // A batch axis may be demoted to dim, never the reverse. kInvalidArgument on a rank mismatch.
  Status update(const Shape& shape, std::optional<int64_t> batch_size);

  // Widens max_shape element-wise (used by the max-batch search,
  // docs/reference/strategies.md#per-graph-pipeline).
  Status extend_max(const Shape& shape);

  int64_t rank() const { return static_cast<int64_t>(kinds_.size()); }
  const Shape& min_shape() const { return min_shape_; }
  const Shape& max_shape() const { return max_shape_; }
  const std::string& dtype() const { return dtype_; }
  AxisKind axis_kind(int64_t axis) const { return kinds_.at(static_cast<size_t>(axis)); }
  const std::vector<AxisKind>& axis_kinds() const { return kinds_; }
  // Size / batch size of the axis, NaN when unknown or not integral-equal across samples.
  double multiplier(int64_t axis) const { return multipliers_.at(static_cast<size_t>(axis)); }
  const std::vector<double>& multipliers() const { return multipliers_; }

  // (axis, integral multiplier) for every batch axis, ascending by axis.
  std::vector<std::pair<int64_t, int64_t>> batch_multipliers() const;
  bool has_batch_axis() const;
  bool has_dynamic_axis() const;  // any batch or dim axis

  // Largest / smallest value of size ÷ multiplier over the batch axes; nullopt without one.
  std::optional<int64_t> max_batch_size() const;
  std::optional<int64_t> min_batch_size() const;

  // Shape of make_batch(sample, batch_size): each batch axis with multiplier m becomes
  // m * batch_size; every other axis keeps the sample's size.
  Shape batched_shape(const Shape& sample_shape, int64_t batch_size) const;

  // True when `shape` has this rank and equal sizes on every static axis.
  bool matches(const Shape& shape) const;

  // Label of one axis: "batch0", "dim2" or the static size as text.
  std::string axis_label(int64_t axis) const;
  // Python-list form with symbolic axes quoted: "['batch0', 3, 'dim2']".
  std::string symbolic_shape() const;

 private:
  std::vector<AxisKind> kinds_;
  Shape min_shape_;
  Shape max_shape_;
  std::vector<double> multipliers_;
  std::string dtype_;
};

}  // namespace aitune
