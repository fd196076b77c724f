#include "checkpoint/manifest_backend.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <set>
#include <utility>

#include "checkpoint/backend_names.h"
#include "checkpoint/state_schema.h"

namespace aitune {
namespace {

using json = nlohmann::json;
using namespace schema;  // NOLINT: the schema's building blocks

Status check_profiles(const json& profiles, const std::string& where, const std::vector<size_t>& ranks) {
  if (profiles.size() != ranks.size()) {
    return bad(where, "one range per tensor input (" + std::to_string(ranks.size()) + ")", profiles);
  }
  for (size_t i = 0; i < profiles.size(); ++i) {
    const json& p = profiles[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (p.is_null()) continue;
    if (!p.is_array() || p.size() != 2 || !p[0].is_array() || !p[1].is_array() || p[0].size() != ranks[i] ||
        p[1].size() != ranks[i]) {
      return bad(at, "[min shape, max shape] of rank " + std::to_string(ranks[i]), p);
    }
    for (size_t a = 0; a < ranks[i]; ++a) {
      const json& lo = p[0][a];
      const json& hi = p[1][a];
      if (!lo.is_number_integer() || lo.get<int64_t>() < 0) return bad(at + "[0][]", "a dimension", lo);
      if (!hi.is_null() && (!hi.is_number_integer() || hi.get<int64_t>() < lo.get<int64_t>())) {
        return bad(at + "[1][]", "null or a dimension not below the minimum", hi);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status check_backend(const Context& ctx, const json& graph, const std::string& where,
                     const std::string& folder, const std::vector<size_t>& input_ranks, size_t num_outputs,
                     bool* is_jit) {
  const json* b = nullptr;
  AITUNE_RETURN_IF_ERROR(get(graph, where, "backend", Kind::kObject, &b));
  const std::string at = where + ".backend";
  const json* v = nullptr;
  // Format 1 named the backend by its Python class path, format 2 by its stable name
  // (backend_names.h); either is only ever looked up, never imported.
  if (ctx.format_version == 1) {
    AITUNE_RETURN_IF_ERROR(get(*b, at, "class", Kind::kString, &v));
    if (v->get<std::string>().empty() || v->get<std::string>().size() > 512)
      return bad(at + ".class", "a class name", *v);
  } else {
    AITUNE_RETURN_IF_ERROR(get(*b, at, "name", Kind::kString, &v));
    const std::string& name = v->get_ref<const std::string&>();
    if (name.empty() || name.size() > 512 ||
        !std::all_of(name.begin(), name.end(), [](unsigned char c) { return c > 0x20 && c < 0x7F; })) {
      return bad(at + ".name", "a backend name", *v);
    }
  }
  AITUNE_RETURN_IF_ERROR(get(*b, at, "config", Kind::kObject, &v));
  if (b->contains("extra")) AITUNE_RETURN_IF_ERROR(get(*b, at, "extra", Kind::kObject, &v));
  std::string precision;
  AITUNE_RETURN_IF_ERROR(
      get_string_in(*b, at, "precision_class", {"fp32", "tf32", "fp16", "bf16", "int8", "fp8"}, &precision));
  if (b->contains("tf32")) AITUNE_RETURN_IF_ERROR(get(*b, at, "tf32", Kind::kObject, &v, /*nullable=*/true));
  const json* jit = nullptr;
  const json* native = nullptr;
  AITUNE_RETURN_IF_ERROR(get(*b, at, "is_jit", Kind::kBool, &jit));
  AITUNE_RETURN_IF_ERROR(get(*b, at, "native", Kind::kBool, &native));
  *is_jit = jit->get<bool>();
  if (b->contains("runtime")) AITUNE_RETURN_IF_ERROR(get(*b, at, "runtime", Kind::kObject, &v));
  bool own_state = false;
  if (b->contains("own_state")) {
    AITUNE_RETURN_IF_ERROR(get(*b, at, "own_state", Kind::kBool, &v));
    own_state = v->get<bool>();
  }
  const json* requires_ = nullptr;
  AITUNE_RETURN_IF_ERROR(get(*b, at, "requires", Kind::kArray, &requires_));
  for (const json& r : *requires_) {
    if (!r.is_string()) return bad(at + ".requires[]", "a fingerprint field name", r);
  }
  const json* device = nullptr;
  AITUNE_RETURN_IF_ERROR(get(*b, at, "device", Kind::kString, &device, /*nullable=*/true));
  if (device) {
    const std::string d = device->get<std::string>();
    const bool cuda = starts_with(d, "cuda:") && d.size() > 5 && d.size() <= 8 &&
                      std::all_of(d.begin() + 5, d.end(), [](unsigned char c) { return std::isdigit(c); });
    if (d != "cpu" && d != "meta" && !cuda)
      return bad(at + ".device", "\"cpu\", \"meta\" or \"cuda:N\"", *device);
  }
  const json* artifacts = nullptr;
  AITUNE_RETURN_IF_ERROR(get(*b, at, "artifacts", Kind::kObject, &artifacts));
  for (const auto& [key, entry] : artifacts->items()) {
    const std::string ak = at + ".artifacts[\"" + key + "\"]";
    if (!entry.is_string()) return bad(ak, "an entry path", entry);
    AITUNE_RETURN_IF_ERROR(check_listed(ctx, ak, entry.get<std::string>(), folder + "/backend/"));
  }
  if (b->contains("state_tensors")) {  // an own-state backend's tensors: one of its artifacts' files
    const json* tensors = nullptr;
    AITUNE_RETURN_IF_ERROR(get(*b, at, "state_tensors", Kind::kString, &tensors, /*nullable=*/true));
    if (tensors)
      AITUNE_RETURN_IF_ERROR(
          check_listed(ctx, at + ".state_tensors", tensors->get<std::string>(), folder + "/backend/"));
  }
  if (own_state) {  // its to_dict() state: every artifact it names is inside the graph's backend folder
    if (!b->contains("state")) return bad_text(at + ".state", "is missing");
    AITUNE_RETURN_IF_ERROR(check_state_node(ctx, (*b)["state"], at + ".state", folder + "/backend/"));
  }
  const json* order = nullptr;
  AITUNE_RETURN_IF_ERROR(get(*b, at, "input_order", Kind::kArray, &order, /*nullable=*/true));
  if (order) {
    std::vector<bool> used(input_ranks.size(), false);
    for (const json& i : *order) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 ||
          static_cast<size_t>(i.get<int64_t>()) >= input_ranks.size() || used[i.get<size_t>()]) {
        return bad(at + ".input_order",
                   "distinct tensor input indices below " + std::to_string(input_ranks.size()), *order);
      }
      used[i.get<size_t>()] = true;
    }
  }
  const json* paths = nullptr;
  AITUNE_RETURN_IF_ERROR(get(*b, at, "output_paths", Kind::kArray, &paths, /*nullable=*/true));
  if (paths) {
    if (paths->size() != num_outputs) {
      return bad(at + ".output_paths",
                 "one access path per output tensor (" + std::to_string(num_outputs) + ")", *paths);
    }
    std::set<std::string> seen;
    for (const json& p : *paths) {
      if (!p.is_string() || !seen.insert(p.get<std::string>()).second)
        return bad(at + ".output_paths", "distinct access paths", *paths);
    }
  }
  // The C++ runtime serves an AOTInductor package through these two (other artifacts, e.g. ONNX,
  // are served from Python and record neither).
  if (native->get<bool>() && artifacts->contains("package") && (!order || !paths)) {
    return bad_text(at, "serves a native package but has no input_order or output_paths");
  }
  const json* profiles = nullptr;
  AITUNE_RETURN_IF_ERROR(get(*b, at, "profiles", Kind::kArray, &profiles, /*nullable=*/true));
  if (profiles) AITUNE_RETURN_IF_ERROR(check_profiles(*profiles, at + ".profiles", input_ranks));
  return Status::Ok();
}

namespace {

ManifestProfile read_profile(const json& p) {
  ManifestProfile r;
  if (p.is_null()) {  // the schema allows it: no hard range for this input
    r.bounded = false;
    return r;
  }
  r.min = p.at(0).get<std::vector<int64_t>>();
  for (const json& d : p.at(1))
    r.max.push_back(d.is_null() ? std::nullopt : std::optional<int64_t>(d.get<int64_t>()));
  return r;
}

}  // namespace

ManifestBackend read_backend(const json& b, int format_version) {
  ManifestBackend out;
  if (format_version == 1) {
    out.class_path = b["class"].get<std::string>();
    out.name = backend_name_for_class_path(out.class_path);
  } else {
    out.name = b["name"].get<std::string>();
  }
  const json& config = b["config"];
  out.config_json = config.dump();
  out.extra_json = json_text(b, "extra", "{}");
  // config.use_cuda_graphs decides; runtime.use_cuda_graphs is the writer's copy (manifest.h).
  const auto cuda_graphs = config.find("use_cuda_graphs");
  out.use_cuda_graphs = cuda_graphs != config.end() && cuda_graphs->is_boolean() && cuda_graphs->get<bool>();
  out.precision_class = b["precision_class"].get<std::string>();
  out.has_tf32 = b.contains("tf32");
  out.tf32_json = json_text(b, "tf32");
  out.is_jit = b["is_jit"].get<bool>();
  out.native = b["native"].get<bool>();
  out.device = b["device"].is_string() ? b["device"].get<std::string>() : "";
  out.requires_ = b["requires"].get<std::vector<std::string>>();
  for (const auto& [key, entry] : b["artifacts"].items()) out.artifacts[key] = entry.get<std::string>();
  if (b["input_order"].is_array()) out.input_order = b["input_order"].get<std::vector<int>>();
  if (b["output_paths"].is_array()) out.output_paths = b["output_paths"].get<std::vector<std::string>>();
  if (b["profiles"].is_array()) {
    out.profiles.emplace();
    for (const json& p : b["profiles"]) out.profiles->push_back(read_profile(p));
  }
  out.own_state = b.value("own_state", false);
  out.state_json = json_text(b, "state");
  out.state_tensors = optional_string(b, "state_tensors");
  return out;
}

std::string json_text(const json& obj, const char* key, const char* absent) {
  const auto it = obj.find(key);
  return it == obj.end() ? absent : it->dump();
}

std::optional<std::string> optional_string(const json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

namespace {

template <typename T>
std::string text_of(const T& value) {
  return json(value).dump();
}

template <typename T>
std::string text_of(const std::optional<T>& value) {
  return value ? json(*value).dump() : "null";
}

std::string text_or_null(const std::string& value) { return value.empty() ? "null" : json(value).dump(); }

// A saved range as the backends take it: [min, max] (a max dimension null: unbounded), or null.
std::string profiles_text(const std::optional<std::vector<ManifestProfile>>& profiles) {
  if (!profiles) return "null";
  json out = json::array();
  for (const ManifestProfile& p : *profiles) {
    if (!p.bounded) {
      out.push_back(nullptr);
      continue;
    }
    json max = json::array();
    for (const auto& d : p.max) max.push_back(d ? json(*d) : json(nullptr));
    out.push_back(json::array({json(p.min), max}));
  }
  return out.dump();
}

}  // namespace

const std::vector<BackendField>& backend_fields() {
  using B = ManifestBackend;
  static const std::vector<BackendField> fields = {
      {"name", [](const B& b) { return text_of(b.name); }},
      {"class_path", [](const B& b) { return text_or_null(b.class_path); }},
      {"config", [](const B& b) { return b.config_json; }},
      {"extra", [](const B& b) { return b.extra_json; }},
      {"precision_class", [](const B& b) { return text_of(b.precision_class); }},
      {"has_tf32", [](const B& b) { return text_of(b.has_tf32); }},
      {"tf32", [](const B& b) { return b.tf32_json; }},
      {"is_jit", [](const B& b) { return text_of(b.is_jit); }},
      {"native", [](const B& b) { return text_of(b.native); }},
      {"use_cuda_graphs", [](const B& b) { return text_of(b.use_cuda_graphs); }},
      {"device", [](const B& b) { return text_or_null(b.device); }},
      {"requires", [](const B& b) { return text_of(b.requires_); }},
      {"artifacts", [](const B& b) { return text_of(b.artifacts); }},
      {"input_order", [](const B& b) { return text_of(b.input_order); }},
      {"output_paths", [](const B& b) { return text_of(b.output_paths); }},
      {"profiles", [](const B& b) { return profiles_text(b.profiles); }},
      {"own_state", [](const B& b) { return text_of(b.own_state); }},
      {"state", [](const B& b) { return b.state_json; }},
      {"state_tensors", [](const B& b) { return text_of(b.state_tensors); }},
  };
  return fields;
}

}  // namespace aitune
