// Sample skeletons as checkpoint/structure.py writes them (docs/reference/recording.md#sample-storage):
// JSON nodes ({"tensor": key}, {"tuple": [...]}, {"list": [...]}, {"dict": [[k, v], ...]},
// {"namedtuple": ..., "items": [...]}, {"mapping": ..., "items": [[k, v], ...]},
// {"dataclass": ..., "fields": {...}}, {"value": ...}) with the tensors stored apart. The C++
// decoder (structure.py is Python's): it finds the tensors of a stored sample with their semantic
// paths, which the C++ runtime pairs with the graph's leaves.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace aitune {

// One tensor of a skeleton: its semantic path (a step, or {"tuple": [steps]} for several; [] for
// a tensor at the root) and its key in the sample's safetensors.
struct SkeletonTensor {
  nlohmann::json path;
  std::string key;
};

// The tensors of a sample's call in flattening order: positional arguments named by `params`
// (the forward's parameters; an index beyond them), then keyword arguments by name.
std::vector<SkeletonTensor> sample_input_tensors(const nlohmann::json& skeleton,
                                                 const std::vector<std::string>& params);

// The tensors of the sample's recorded reference output ("reference_output"; none without one).
std::vector<SkeletonTensor> sample_output_tensors(const nlohmann::json& skeleton);

}  // namespace aitune
