#include "checkpoint/skeleton.h"

#include <cstdint>
#include <utility>

namespace aitune {
namespace {

using json = nlohmann::json;

// Walks a skeleton node, collecting tensors with their path steps.
void walk(const json& node, std::vector<json>& steps, std::vector<SkeletonTensor>& out) {
  if (!node.is_object()) return;
  if (node.contains("tensor")) {
    json path = steps.size() == 1 ? steps[0] : json{{"tuple", steps}};
    out.push_back({std::move(path), node["tensor"].get<std::string>()});
    return;
  }
  auto seq = [&](const json& items) {
    for (size_t i = 0; i < items.size(); ++i) {
      steps.push_back(static_cast<int64_t>(i));
      walk(items[i], steps, out);
      steps.pop_back();
    }
  };
  if (node.contains("tuple")) return seq(node["tuple"]);
  if (node.contains("list")) return seq(node["list"]);
  if (node.contains("namedtuple")) return seq(node["items"]);
  if (node.contains("dict") || node.contains("mapping")) {
    for (const json& kv : node.contains("dict") ? node["dict"] : node["items"]) {
      steps.push_back(kv[0]);
      walk(kv[1], steps, out);
      steps.pop_back();
    }
    return;
  }
  if (node.contains("dataclass")) {
    for (const auto& [k, v] : node["fields"].items()) {
      steps.push_back(k);
      walk(v, steps, out);
      steps.pop_back();
    }
  }
}

}  // namespace

std::vector<SkeletonTensor> sample_input_tensors(const json& skeleton,
                                                 const std::vector<std::string>& params) {
  std::vector<SkeletonTensor> found;
  std::vector<json> steps;
  const json& args = skeleton.value("args", json::object());
  if (args.contains("tuple") || args.contains("list")) {
    const json& items = args.contains("tuple") ? args["tuple"] : args["list"];
    for (size_t i = 0; i < items.size(); ++i) {
      steps = {i < params.size() ? json(params[i]) : json(static_cast<int64_t>(i))};
      walk(items[i], steps, found);
    }
  }
  const json& kwargs = skeleton.value("kwargs", json::object());
  if (kwargs.contains("dict")) {
    for (const json& kv : kwargs["dict"]) {
      steps = {kv[0]};
      walk(kv[1], steps, found);
    }
  }
  return found;
}

std::vector<SkeletonTensor> sample_output_tensors(const json& skeleton) {
  std::vector<SkeletonTensor> found;
  if (!skeleton.contains("reference_output")) return found;
  std::vector<json> steps;
  walk(skeleton["reference_output"], steps, found);
  return found;
}

}  // namespace aitune
