#include "checkpoint/semantic_path.h"

namespace aitune {
namespace {

std::string py_repr(const nlohmann::json& v) {
  if (v.is_string()) return "'" + v.get<std::string>() + "'";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return v.dump();
}

}  // namespace

std::string semantic_display(const nlohmann::json& path) {
  if (path.is_string()) return path.get<std::string>();
  if (path.is_object() && path.contains("tuple")) {
    const nlohmann::json& items = path["tuple"];
    std::string out = "(";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + py_repr(items[i]);
    if (items.size() == 1) out += ",";
    return out + ")";
  }
  return path.dump();
}

}  // namespace aitune
