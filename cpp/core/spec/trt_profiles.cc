#include "spec/trt_profiles.h"

#include <algorithm>
#include <set>

namespace aitune {
namespace {

std::string quoted(const std::string& text) { return "'" + text + "'"; }

std::string name_list(const std::vector<std::string>& names) {
  std::string text = "[";
  for (size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + quoted(names[i]);
  return text + "]";
}

std::string range_text(const ProfileRange& r) {
  return "min=" + format_shape(r.min) + ", opt=" + format_shape(r.opt) + ", max=" + format_shape(r.max);
}

bool contains(const ProfileRange& range, const Shape& shape) {
  if (shape.size() != range.min.size()) return false;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] < range.min[axis] || shape[axis] > range.max[axis]) return false;
  }
  return true;
}

Status check_range(const RecordedInput& input, const ProfileRange& r) {
  const std::string prefix = "TensorRT profile for input " + quoted(input.name);
  const size_t rank = input.min.size();
  for (const Shape* shape : {&r.min, &r.opt, &r.max}) {
    AITUNE_CHECK_ARG(shape->size() == rank, prefix + " has rank " + std::to_string(shape->size()) +
                                                ", recorded rank is " + std::to_string(rank) + ".");
  }
  for (const Shape* shape : {&r.min, &r.opt, &r.max}) {
    for (int64_t size : *shape) {
      AITUNE_CHECK_ARG(size >= 0, prefix + " sizes must be non-negative integers, got " + range_text(r));
    }
  }
  for (size_t axis = 0; axis < rank; ++axis) {
    AITUNE_CHECK_ARG(r.min[axis] <= r.opt[axis] && r.opt[axis] <= r.max[axis],
                     prefix + " must satisfy min <= opt <= max on every axis, got " + range_text(r));
  }
  for (size_t axis = 0; axis < rank; ++axis) {
    if (axis >= input.is_static.size() || !input.is_static[axis]) continue;
    const int64_t size = input.min[axis];
    AITUNE_CHECK_ARG(r.min[axis] == size && r.opt[axis] == size && r.max[axis] == size,
                     prefix + " axis " + std::to_string(axis) + " is static (" + std::to_string(size) +
                         ") in the recorded graph, got min=" + std::to_string(r.min[axis]) +
                         ", max=" + std::to_string(r.max[axis]));
  }
  return Status::Ok();
}

}  // namespace

OptimizationProfile single_profile(const std::vector<RecordedInput>& inputs) {
  OptimizationProfile profile;
  for (const RecordedInput& input : inputs) profile.inputs.push_back({input.min, input.max, input.max});
  return profile;
}

StatusOr<std::vector<OptimizationProfile>> samples_used_profiles(
    const std::vector<RecordedInput>& inputs, const std::vector<std::vector<Shape>>& sample_shapes) {
  std::vector<OptimizationProfile> profiles;
  std::set<std::vector<Shape>> seen;
  for (size_t s = 0; s < sample_shapes.size(); ++s) {
    const std::vector<Shape>& shapes = sample_shapes[s];
    AITUNE_CHECK_ARG(shapes.size() == inputs.size(),
                     "Stored sample " + std::to_string(s) + " has " + std::to_string(shapes.size()) +
                         " tensor inputs, the graph has " + std::to_string(inputs.size()));
    if (!seen.insert(shapes).second) continue;
    OptimizationProfile profile;
    for (const Shape& shape : shapes) profile.inputs.push_back({shape, shape, shape});
    profiles.push_back(std::move(profile));
  }
  AITUNE_CHECK_ARG(!profiles.empty(), "ProfileMode.SAMPLES_USED needs at least one stored sample");
  return profiles;
}

OptimizationProfile dynamic_shapes_profile(const std::vector<RecordedInput>& inputs,
                                           const std::vector<InputShapeDef>& defs) {
  OptimizationProfile profile;
  for (const RecordedInput& input : inputs) {
    const auto def = std::find_if(defs.begin(), defs.end(),
                                  [&](const InputShapeDef& d) { return d.path_repr == input.semantic_repr; });
    if (def == defs.end() || def->axes.size() != input.min.size()) {
      profile.inputs.push_back({input.min, input.max, input.max});
      continue;
    }
    const EffectiveShape e = effective_shape(*def);
    profile.inputs.push_back({e.min, e.opt, e.max});
  }
  return profile;
}

StatusOr<std::vector<OptimizationProfile>> validate_user_profiles(const std::vector<RecordedInput>& inputs,
                                                                  const std::vector<UserProfile>& profiles) {
  AITUNE_CHECK_ARG(!profiles.empty(), "TensorRT profiles list is empty: give at least one TensorRTProfile");
  std::vector<std::string> recorded;
  for (const RecordedInput& input : inputs) recorded.push_back(input.name);
  std::vector<OptimizationProfile> out;
  for (const UserProfile& user : profiles) {
    std::vector<std::string> given, missing, unknown;
    for (const NamedProfileRange& entry : user) {
      given.push_back(entry.name);
      if (std::find(recorded.begin(), recorded.end(), entry.name) == recorded.end())
        unknown.push_back(entry.name);
    }
    for (const std::string& name : recorded) {
      if (std::find(given.begin(), given.end(), name) == given.end()) missing.push_back(name);
    }
    AITUNE_CHECK_ARG(missing.empty() && unknown.empty(),
                     "TensorRT profile inputs " + name_list(given) + " do not match recorded tensor inputs " +
                         name_list(recorded) + " (missing: " + name_list(missing) +
                         ", unknown: " + name_list(unknown) + ").");
    OptimizationProfile profile;
    for (const RecordedInput& input : inputs) {
      const auto entry = std::find_if(user.begin(), user.end(),
                                      [&](const NamedProfileRange& e) { return e.name == input.name; });
      AITUNE_RETURN_IF_ERROR(check_range(input, entry->range));
      profile.inputs.push_back(entry->range);
    }
    out.push_back(std::move(profile));
  }
  return out;
}

std::vector<std::pair<Shape, Shape>> profile_envelope(const std::vector<OptimizationProfile>& profiles) {
  std::vector<std::pair<Shape, Shape>> envelope;
  for (const OptimizationProfile& profile : profiles) {
    if (envelope.empty()) {
      for (const ProfileRange& r : profile.inputs) envelope.emplace_back(r.min, r.max);
      continue;
    }
    for (size_t i = 0; i < profile.inputs.size() && i < envelope.size(); ++i) {
      auto& [low, high] = envelope[i];
      const ProfileRange& r = profile.inputs[i];
      for (size_t axis = 0; axis < low.size() && axis < r.min.size(); ++axis) {
        low[axis] = std::min(low[axis], r.min[axis]);
        high[axis] = std::max(high[axis], r.max[axis]);
      }
    }
  }
  return envelope;
}

std::string describe_profile(const std::vector<std::string>& names, const OptimizationProfile& profile) {
  std::string text = "{";
  for (size_t i = 0; i < profile.inputs.size(); ++i) {
    const ProfileRange& r = profile.inputs[i];
    text += (i ? ", " : "") + quoted(i < names.size() ? names[i] : std::to_string(i)) + ": [" +
            format_shape(r.min) + ", " + format_shape(r.opt) + ", " + format_shape(r.max) + "]";
  }
  return text + "}";
}

StatusOr<size_t> select_profile(const std::vector<std::string>& names,
                                const std::vector<OptimizationProfile>& profiles,
                                const std::vector<Shape>& shapes) {
  for (size_t p = 0; p < profiles.size(); ++p) {
    const OptimizationProfile& profile = profiles[p];
    bool fits = profile.inputs.size() == shapes.size();
    for (size_t i = 0; fits && i < shapes.size(); ++i) fits = contains(profile.inputs[i], shapes[i]);
    if (fits) return p;
  }
  // No fit: name the first input that lies outside every profile on some axis, else the combination.
  const auto envelope = profile_envelope(profiles);
  for (size_t i = 0; i < shapes.size() && i < envelope.size(); ++i) {
    const auto& [low, high] = envelope[i];
    const std::string name = i < names.size() ? names[i] : std::to_string(i);
    if (shapes[i].size() != low.size()) {
      return profile_shape_error("Input shape " + format_shape(shapes[i]) + " for input " + quoted(name) +
                                 " has rank " + std::to_string(shapes[i].size()) +
                                 ", the TensorRT profiles have rank " + std::to_string(low.size()));
    }
    for (size_t axis = 0; axis < low.size(); ++axis) {
      if (shapes[i][axis] > high[axis]) {
        return profile_shape_error("Input shape " + format_shape(shapes[i]) + " exceeds max profile shape " +
                                   format_shape(high) + " for input " + quoted(name));
      }
    }
    for (size_t axis = 0; axis < low.size(); ++axis) {
      if (shapes[i][axis] < low[axis]) {
        return profile_shape_error("Input shape " + format_shape(shapes[i]) + " is below min profile shape " +
                                   format_shape(low) + " for input " + quoted(name));
      }
    }
  }
  std::string given = "{";
  for (size_t i = 0; i < shapes.size(); ++i) {
    given += (i ? ", " : "") + quoted(i < names.size() ? names[i] : std::to_string(i)) + ": " +
             format_shape(shapes[i]);
  }
  given += "}";
  std::string listed = "[";
  for (size_t p = 0; p < profiles.size(); ++p)
    listed += (p ? ", " : "") + describe_profile(names, profiles[p]);
  listed += "]";
  return profile_shape_error("No TensorRT optimization profile matches the input shapes: " + given +
                             "; profiles: " + listed);
}

}  // namespace aitune
