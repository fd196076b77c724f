#include "spec/dynamic_dims.h"

#include <map>

namespace aitune {
namespace {

std::string quoted(std::string_view text) {
  std::string result;
  result.reserve(text.size() + 2);
  result += '\'';
  result += text;
  result += '\'';
  return result;
}

// Where the first occurrence of a shared dim was seen in a call, for the "same size" message.
struct DimSighting {
  int64_t size;
  const std::string* path_repr;
  size_t axis;
};

std::string call_prefix(std::string_view module_name, const std::string& path_repr) {
  return "Dynamic shape for module " + quoted(module_name) + ", input " + path_repr;
}

const Shape* find_input(const std::vector<std::pair<std::string, Shape>>& inputs,
                        const std::string& path_repr) {
  for (const auto& [path, shape] : inputs) {
    if (path == path_repr) return &shape;
  }
  return nullptr;
}

}  // namespace

std::string DimDef::describe() const {
  std::string text = std::string(is_batch ? "BatchDim(" : "DynamicDim(") + quoted(name) +
                     ", min=" + std::to_string(min) + ", max=" + std::to_string(max);
  if (opt.has_value()) text += ", opt=" + std::to_string(*opt);
  return text + ")";
}

Status validate_dim_def(const DimDef& dim) {
  AITUNE_CHECK_ARG(!dim.name.empty(), "Dynamic dimension name must be a non-empty string.");
  const std::string prefix = "Dynamic dimension " + quoted(dim.name);
  const std::string bounds = "min=" + std::to_string(dim.min) + ", max=" + std::to_string(dim.max);
  AITUNE_CHECK_ARG(dim.min > 0 && dim.max > 0,
                   prefix + " bounds must be positive integers, got " + bounds + ".");
  AITUNE_CHECK_ARG(dim.min < dim.max, prefix + " must satisfy min < max, got " + bounds + ".");
  if (dim.opt.has_value()) {
    AITUNE_CHECK_ARG(dim.min <= *dim.opt && *dim.opt <= dim.max,
                     prefix + " must satisfy min <= opt <= max, got min=" + std::to_string(dim.min) +
                         ", opt=" + std::to_string(*dim.opt) + ", max=" + std::to_string(dim.max) + ".");
  }
  return Status::Ok();
}

Status validate_shape_defs(const std::vector<InputShapeDef>& defs) {
  // The first definition of each name; std::map keeps the check independent of hash order.
  std::map<std::string, const DimDef*, std::less<>> first_by_name;
  for (const InputShapeDef& def : defs) {
    for (size_t axis = 0; axis < def.axes.size(); ++axis) {
      if (const auto* size = std::get_if<int64_t>(&def.axes[axis])) {
        AITUNE_CHECK_ARG(*size >= 0, "Dynamic shape for input " + def.path_repr + " axis " +
                                         std::to_string(axis) + " has a negative static size " +
                                         std::to_string(*size) + ".");
        continue;
      }
      const DimDef& dim = std::get<DimDef>(def.axes[axis]);
      AITUNE_RETURN_IF_ERROR(validate_dim_def(dim));
      const auto [it, inserted] = first_by_name.emplace(dim.name, &dim);
      AITUNE_CHECK_ARG(inserted || *it->second == dim,
                       "Dynamic dimension " + quoted(dim.name) + " has conflicting definitions: " +
                           it->second->describe() + " and " + dim.describe() + ".");
    }
  }
  return Status::Ok();
}

Status check_call_against_defs(std::string_view module_name, const std::vector<InputShapeDef>& defs,
                               const std::vector<std::pair<std::string, Shape>>& inputs) {
  std::map<std::string_view, DimSighting, std::less<>> seen;
  for (const InputShapeDef& def : defs) {
    const Shape* shape = find_input(inputs, def.path_repr);
    if (shape == nullptr) continue;  // an unobserved path is reported before tuning instead
    // Messages are built only on failure: this runs on every recorded call.
    const auto prefix = [&] { return call_prefix(module_name, def.path_repr); };
    AITUNE_CHECK_ARG(shape->size() == def.axes.size(), prefix() + " expects rank " +
                                                           std::to_string(def.axes.size()) + ", got shape " +
                                                           format_shape(*shape));
    for (size_t axis = 0; axis < def.axes.size(); ++axis) {
      const int64_t size = (*shape)[axis];
      const auto axis_error = [&](const std::string& expects) {
        return prefix() + " axis " + std::to_string(axis) + " expects " + expects + ", got " +
               std::to_string(size) + " (shape " + format_shape(*shape) + ")";
      };
      if (const auto* expected = std::get_if<int64_t>(&def.axes[axis])) {
        AITUNE_CHECK_ARG(size == *expected, axis_error("size " + std::to_string(*expected)));
        continue;
      }
      const DimDef& dim = std::get<DimDef>(def.axes[axis]);
      AITUNE_CHECK_ARG(dim.min <= size && size <= dim.max,
                       axis_error(quoted(dim.name) + " between " + std::to_string(dim.min) + " and " +
                                  std::to_string(dim.max)));
      const auto [it, inserted] = seen.emplace(dim.name, DimSighting{size, &def.path_repr, axis});
      const DimSighting& first = it->second;
      AITUNE_CHECK_ARG(inserted || first.size == size,
                       "Dynamic dimension " + quoted(dim.name) + " of module " + quoted(module_name) +
                           " must have the same size across inputs, got " + std::to_string(first.size) +
                           " for input " + *first.path_repr + " axis " + std::to_string(first.axis) +
                           " and " + std::to_string(size) + " for input " + def.path_repr + " axis " +
                           std::to_string(axis));
    }
  }
  return Status::Ok();
}

Status check_defs_observed(std::string_view module_name, const std::vector<InputShapeDef>& defs,
                           const std::vector<std::string>& recorded_path_reprs) {
  std::string missing;
  for (const InputShapeDef& def : defs) {
    bool observed = false;
    for (const std::string& recorded : recorded_path_reprs) observed = observed || recorded == def.path_repr;
    if (observed) continue;
    if (!missing.empty()) missing += ", ";
    missing += def.path_repr;
  }
  AITUNE_CHECK_ARG(missing.empty(), "Dynamic shape paths for module " + quoted(module_name) +
                                        " did not match any recorded tensor inputs: [" + missing + "]");
  return Status::Ok();
}

EffectiveShape effective_shape(const InputShapeDef& def) {
  EffectiveShape shape;
  for (const AxisDef& axis : def.axes) {
    if (const auto* size = std::get_if<int64_t>(&axis)) {
      shape.min.push_back(*size);
      shape.opt.push_back(*size);
      shape.max.push_back(*size);
    } else {
      const DimDef& dim = std::get<DimDef>(axis);
      shape.min.push_back(dim.min);
      shape.opt.push_back(dim.opt.value_or(dim.max));
      shape.max.push_back(dim.max);
    }
  }
  return shape;
}

}  // namespace aitune
