#include "checkpoint/manifest.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "checkpoint/backend_names.h"
#include "checkpoint/manifest_schema.h"
#include "checkpoint/semantic_path.h"

namespace aitune {
namespace {

using json = nlohmann::json;

std::optional<ManifestScalar> scalar_of(const json& node) {
  if (!node.is_object() || !node.contains("value")) return std::nullopt;
  const json& c = node["value"];
  if (c.is_null()) return ManifestScalar{};
  if (c.is_boolean()) return ManifestScalar{c.get<bool>()};
  if (c.is_number_integer()) return ManifestScalar{c.get<int64_t>()};
  if (c.is_number()) return ManifestScalar{c.get<double>()};
  if (c.is_string()) return ManifestScalar{c.get<std::string>()};
  return std::nullopt;
}

ManifestLeaf read_leaf(const json& j) {
  ManifestLeaf leaf;
  leaf.semantic_path = semantic_display(j["semantic_path"]);
  leaf.access_path = j["access_path"].get<std::string>();
  if (j.contains("value")) {
    leaf.is_tensor = false;
    leaf.value_json = j["value"].dump();
    leaf.scalar = scalar_of(j["value"]);
    return leaf;
  }
  leaf.name = j["name"].get<std::string>();
  for (const json& d : j["shape"]) leaf.shape.push_back(d.is_string() ? d.get<std::string>() : d.dump());
  leaf.axis_kinds = j["axis_kinds"].get<std::vector<std::string>>();
  leaf.min_shape = j["min_shape"].get<std::vector<int64_t>>();
  leaf.max_shape = j["max_shape"].get<std::vector<int64_t>>();
  leaf.dtype = j["dtype"].get<std::string>();
  return leaf;
}

std::vector<ManifestLeaf> read_leaves(const json& spec) {
  std::vector<ManifestLeaf> out;
  for (const json& l : spec["leaves"]) out.push_back(read_leaf(l));
  return out;
}

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
  out.use_cuda_graphs = config.contains("use_cuda_graphs") && config["use_cuda_graphs"].is_boolean() &&
                        config["use_cuda_graphs"].get<bool>();
  out.precision_class = b["precision_class"].get<std::string>();
  out.has_tf32 = b.contains("tf32");
  out.is_jit = b["is_jit"].get<bool>();
  out.native = b["native"].get<bool>();
  out.device = b["device"].is_string() ? b["device"].get<std::string>() : "";
  out.requires_ = b["requires"].get<std::vector<std::string>>();
  for (const auto& [key, entry] : b["artifacts"].items()) out.artifacts[key] = entry.get<std::string>();
  if (b["input_order"].is_array()) out.input_order = b["input_order"].get<std::vector<int>>();
  if (b["output_paths"].is_array()) out.output_paths = b["output_paths"].get<std::vector<std::string>>();
  if (b["profiles"].is_array()) {
    for (const json& p : b["profiles"]) out.profiles.push_back(read_profile(p));
  }
  return out;
}

ManifestGraph read_graph(const json& g, int format_version) {
  ManifestGraph out;
  out.name = g["name"].get<std::string>();
  out.inputs = read_leaves(g["input_spec"]);
  out.outputs = read_leaves(g["output_spec"]);
  out.backend = read_backend(g["backend"], format_version);
  out.samples = g["samples"].get<std::vector<std::string>>();
  if (g.contains("correctness")) out.correctness_json = g["correctness"].dump();
  return out;
}

ManifestModule read_module(const json& m, int format_version) {
  ManifestModule out;
  out.name = m["name"].get<std::string>();
  out.class_name = m["class"].get<std::string>();
  out.fallback_policy = m["fallback_policy"].get<std::string>();
  for (const json& p : m["forward_signature"]) out.forward_params.push_back(p["name"].get<std::string>());
  for (const json& g : m["graphs"]) out.graphs.push_back(read_graph(g, format_version));
  return out;
}

}  // namespace

StatusOr<Manifest> read_manifest(std::string_view text) {
  AITUNE_ASSIGN_OR_RETURN(json m, parse_manifest(text));
  try {
    Manifest out;
    out.format_version = m["format_version"].get<int>();
    out.aitune_version = m["aitune_version"].get<std::string>();
    out.created_at = m["created_at"].get<std::string>();
    out.fingerprint_json = m["fingerprint"].dump();
    for (const auto& [key, value] : m["fingerprint"].items()) {
      out.fingerprint[key] =
          value.is_null()
              ? std::nullopt
              : std::optional<std::string>(value.is_string() ? value.get<std::string>() : value.dump());
    }
    for (const json& f : m["files"]) {
      out.files.push_back(
          {f["path"].get<std::string>(), f["size"].get<uint64_t>(), f["sha256"].get<std::string>()});
    }
    for (const json& mod : m["modules"]) out.modules.push_back(read_module(mod, out.format_version));
    return out;
  } catch (const std::exception& e) {
    // The schema admits only what is read above; reaching here means the two disagree.
    return Status(StatusCode::kInternal,
                  std::string("manifest.json passed the schema check but could not be read: ") + e.what());
  }
}

}  // namespace aitune
