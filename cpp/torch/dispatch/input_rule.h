// One tensor input's rule, checked on every call before any device work
// (docs/reference/dispatch.md#input-check): the accepted dtypes and the shape range. The Python
// dispatcher and the C++ runtime build the same rules and check them with GraphDispatch, so both
// word a violation the same way.
#pragma once

#include <c10/core/ScalarType.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace aitune::dispatch {

// A maximum size with no upper bound (printed as None, like Python's profile).
inline constexpr int64_t kNoUpperBound = std::numeric_limits<int64_t>::max();

enum class ShapeRange {
  kNone,      // no range saved for this input: any shape of the right rank goes
  kEnvelope,  // the recorded envelope (eager, JIT): a call outside it is allowed and reported once
  kProfile,   // the backend's profile (AOT): a call outside it, or of another rank, is refused
};

struct InputRule {
  size_t leaf = 0;                      // the tensor's index among the call's leaves
  std::vector<c10::ScalarType> dtypes;  // accepted; tried in order
  std::string path_repr;                // Python's repr of the semantic path: 'x', ('options', 'mask')
  std::string tensor_name;              // input_x
  ShapeRange range = ShapeRange::kNone;
  std::vector<int64_t> min_shape;  // one size per axis (empty for kNone)
  std::vector<int64_t> max_shape;  // same rank as min_shape; kNoUpperBound: unbounded axis
  // Set once the envelope was left and reported (kEnvelope only); shared by copies of the rule so
  // the report stays once per input however the rule is copied into a new dispatcher.
  std::shared_ptr<std::atomic<bool>> outside_reported = std::make_shared<std::atomic<bool>>(false);
};

// "[1, None]": a shape as the user reads the profile (kNoUpperBound prints as None).
std::string profile_text(const std::vector<int64_t>& shape);

}  // namespace aitune::dispatch
