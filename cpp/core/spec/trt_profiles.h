// TensorRT optimization profiles (docs/reference/tensorrt.md#optimization-profiles): deriving them from the
// recorded graph, validating user-given ones against it, and choosing the profile for a call. Torch-free so
// the Python backend and a C++ runtime built with TensorRT share one implementation of each rule.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"
#include "spec/dynamic_dims.h"
#include "spec/shape.h"

namespace aitune {

// One recorded tensor input of a graph, in the graph's input order.
struct RecordedInput {
  std::string name;             // display path, as the log table's Access Path column ("inputs[\"tokens\"]")
  std::string semantic_repr;    // Python repr of the semantic path ("'x'", "('inputs', 'tokens')")
  Shape min;                    // recorded min shape (per axis)
  Shape max;                    // recorded max shape, including the max-batch search's batch
  std::vector<bool> is_static;  // per axis: static in the recorded graph
};

struct ProfileRange {
  Shape min, opt, max;
  bool operator==(const ProfileRange&) const = default;
};

// One profile: a range per recorded input, in the recorded input order.
struct OptimizationProfile {
  std::vector<ProfileRange> inputs;
  bool operator==(const OptimizationProfile&) const = default;
};

// A user-given profile entry, its key already resolved to a recorded input's name where it
// matches one (otherwise the key as the user wrote it).
struct NamedProfileRange {
  std::string name;
  ProfileRange range;
};
using UserProfile = std::vector<NamedProfileRange>;

// ProfileMode.SINGLE: min = recorded min, opt = max = recorded max.
OptimizationProfile single_profile(const std::vector<RecordedInput>& inputs);

// ProfileMode.SAMPLES_USED: one static profile (min = opt = max) per distinct sample shape,
// in order of first appearance. `sample_shapes[s][i]` is input i's shape in stored sample s.
StatusOr<std::vector<OptimizationProfile>> samples_used_profiles(
    const std::vector<RecordedInput>& inputs, const std::vector<std::vector<Shape>>& sample_shapes);

// Module dynamic_shapes: one profile (min, opt or max, max) from the definitions (matched by
// semantic_repr); inputs without a definition use (recorded min, recorded max, recorded max).
OptimizationProfile dynamic_shapes_profile(const std::vector<RecordedInput>& inputs,
                                           const std::vector<InputShapeDef>& defs);

// list[TensorRTProfile]: checks each profile against the recorded inputs (exact inputs, ranks,
// non-negative sizes, min <= opt <= max, static axes) and returns them in recorded input order.
// Failures are kInvalidArgument with the docs/reference/tensorrt.md#optimization-profiles messages.
StatusOr<std::vector<OptimizationProfile>> validate_user_profiles(const std::vector<RecordedInput>& inputs,
                                                                  const std::vector<UserProfile>& profiles);

// The first profile containing every shape (shapes in recorded input order). When none does:
// kProfileShape with "Input shape X exceeds max profile shape Y for input 'n'" (Y = element-wise
// max over the profiles), "... is below min profile shape Y ..." or "No TensorRT optimization
// profile matches the input shapes: {...}; profiles: [...]".
StatusOr<size_t> select_profile(const std::vector<std::string>& names,
                                const std::vector<OptimizationProfile>& profiles,
                                const std::vector<Shape>& shapes);

// Per input: (element-wise min of the mins, element-wise max of the maxes) over all profiles,
// the hard range the dispatcher checks before a call reaches the engine.
std::vector<std::pair<Shape, Shape>> profile_envelope(const std::vector<OptimizationProfile>& profiles);

// "{'x': [[1, 3], [4, 3], [8, 3]]}" for one profile: its range per input as [min, opt, max].
std::string describe_profile(const std::vector<std::string>& names, const OptimizationProfile& profile);

}  // namespace aitune
