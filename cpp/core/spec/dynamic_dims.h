// Explicit dynamic shapes (docs/reference/recording.md#explicit-dynamic-shapes): user-declared DynamicDim /
// BatchDim per input, their validation, the check of every recorded call against them, and the effective
// (min, opt, max) shapes that exporters and TensorRT profiles use. Messages are the docs/reference/errors.md
// texts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"
#include "spec/shape.h"

namespace aitune {

struct DimDef {
  std::string name;
  bool is_batch = false;  // BatchDim vs DynamicDim
  int64_t min = 0;
  int64_t max = 0;
  std::optional<int64_t> opt;

  // "DynamicDim('d', min=1, max=8)" / "BatchDim('b', min=1, max=8, opt=4)".
  std::string describe() const;
  bool operator==(const DimDef&) const = default;
};

using AxisDef = std::variant<int64_t, DimDef>;

struct InputShapeDef {
  // Display form of the semantic path: Python's repr, e.g. "'x'" or "('options', 'mask')".
  std::string path_repr;
  std::vector<AxisDef> axes;
};

struct EffectiveShape {
  Shape min;
  Shape opt;  // opt of every dim, defaulting to its max
  Shape max;
};

// One definition on its own: non-empty name, positive integer bounds, min < max,
// min <= opt <= max.
Status validate_dim_def(const DimDef& dim);

// All definitions of a module: each dim valid, static sizes >= 0, and dims sharing a name
// identical in kind and bounds.
Status validate_shape_defs(const std::vector<InputShapeDef>& defs);

// One recorded call: `inputs` holds (path_repr, shape) for the call's tensor leaves. Every
// defined input present in the call must have the defined rank and static sizes, dynamic sizes
// within [min, max], and dims sharing a name must have one size in the call.
Status check_call_against_defs(std::string_view module_name, const std::vector<InputShapeDef>& defs,
                               const std::vector<std::pair<std::string, Shape>>& inputs);

// Before tuning: every defined path must have been recorded.
Status check_defs_observed(std::string_view module_name, const std::vector<InputShapeDef>& defs,
                           const std::vector<std::string>& recorded_path_reprs);

EffectiveShape effective_shape(const InputShapeDef& def);

}  // namespace aitune
