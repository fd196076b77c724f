#include "checkpoint/manifest.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "checkpoint/manifest_backend.h"
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
  if (c.is_number_unsigned() && c.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return std::nullopt;  // beyond what a call's int64 can equal
  if (c.is_number_integer()) return ManifestScalar{c.get<int64_t>()};
  if (c.is_number()) return ManifestScalar{c.get<double>()};
  if (c.is_string()) return ManifestScalar{c.get<std::string>()};
  return std::nullopt;
}

// A step is a string or an integer the schema checked to fit int64.
std::variant<int64_t, std::string> path_step(const json& step) {
  if (step.is_string()) return step.get<std::string>();
  return step.get<int64_t>();
}

ManifestSemanticPath read_semantic_path(const json& path) {
  ManifestSemanticPath out;
  if (path.is_object()) {
    out.is_tuple = true;
    for (const json& step : path["tuple"]) out.steps.push_back(path_step(step));
  } else {
    out.steps.push_back(path_step(path));
  }
  return out;
}

ManifestLeaf read_leaf(const json& j) {
  ManifestLeaf leaf;
  leaf.semantic_path = semantic_display(j["semantic_path"]);
  leaf.semantic_steps = read_semantic_path(j["semantic_path"]);
  leaf.access_path = j["access_path"].get<std::string>();
  if (j.contains("value")) {
    leaf.is_tensor = false;
    leaf.value_json = j["value"].dump();
    leaf.scalar = scalar_of(j["value"]);
    leaf.needs_eq = j.value("needs_eq", false);
    return leaf;
  }
  leaf.name = j["name"].get<std::string>();
  for (const json& d : j["shape"]) leaf.shape.push_back(d.is_string() ? d.get<std::string>() : d.dump());
  leaf.axis_kinds = j["axis_kinds"].get<std::vector<std::string>>();
  leaf.min_shape = j["min_shape"].get<std::vector<int64_t>>();
  leaf.max_shape = j["max_shape"].get<std::vector<int64_t>>();
  for (const json& m : j["multipliers"])
    leaf.multipliers.push_back(m.is_null() ? std::nullopt : std::optional<double>(m.get<double>()));
  leaf.dtype = j["dtype"].get<std::string>();
  leaf.dtypes = j["dtypes"].get<std::vector<std::string>>();
  return leaf;
}

std::vector<ManifestLeaf> read_leaves(const json& spec) {
  std::vector<ManifestLeaf> out;
  for (const json& l : spec["leaves"]) out.push_back(read_leaf(l));
  return out;
}

// The graph's own fields (what graph_to_json writes), without backend and samples.
ManifestGraph read_graph_fields(const json& g) {
  ManifestGraph out;
  out.name = g["name"].get<std::string>();
  out.key_tokens = g["key_tokens"].get<std::vector<uint64_t>>();
  out.llm_phase = optional_string(g, "llm_phase");
  out.inputs = read_leaves(g["input_spec"]);
  out.outputs = read_leaves(g["output_spec"]);
  return out;
}

ManifestGraph read_graph(const json& g, int format_version) {
  ManifestGraph out = read_graph_fields(g);
  out.backend = read_backend(g["backend"], format_version);
  out.samples = g["samples"].get<std::vector<std::string>>();
  if (g.contains("correctness")) out.correctness_json = g["correctness"].dump();
  return out;
}

ManifestModule read_module(const json& m, int format_version) {
  ManifestModule out;
  out.name = m["name"].get<std::string>();
  out.prefix = m["prefix"].get<std::string>();
  out.class_name = m["class"].get<std::string>();
  out.strict_mode = m["strict_mode"].get<bool>();
  out.fallback_policy = m["fallback_policy"].get<std::string>();
  out.weights_json = m["weights"].dump();
  for (const json& p : m["forward_signature"]) {
    out.forward_signature.push_back(
        {p["name"].get<std::string>(), p["kind"].get<std::string>(), p["has_default"].get<bool>()});
  }
  out.dynamic_shapes_json = json_text(m, "dynamic_shapes");
  for (const json& g : m["graphs"]) out.graphs.push_back(read_graph(g, format_version));
  return out;
}

ManifestRoot read_root(const json& r) {
  return {r["kind"].get<std::string>(), r["class"].get<std::string>(), r["weights"].dump()};
}

// The schema admits only what the readers above read; reaching here means the two disagree.
Status schema_disagrees(const char* what, const std::exception& e) {
  return {StatusCode::kInternal,
          std::string(what) + " passed the schema check but could not be read: " + e.what()};
}

}  // namespace

StatusOr<Manifest> read_manifest(std::string_view text) {
  AITUNE_ASSIGN_OR_RETURN(json m, parse_manifest(text));
  try {
    Manifest out;
    out.format_version = m["format_version"].get<int>();
    out.kind = optional_string(m, "kind");
    out.results_key = optional_string(m, "results_key");
    out.aitune_version = m["aitune_version"].get<std::string>();
    out.created_at = m["created_at"].get<std::string>();
    out.fingerprint_json = m["fingerprint"].dump();
    for (const auto& [key, value] : m["fingerprint"].items()) {
      out.fingerprint[key] =
          value.is_null()
              ? std::nullopt
              : std::optional<std::string>(value.is_string() ? value.get<std::string>() : value.dump());
    }
    out.root = read_root(m["root"]);
    for (const json& f : m["files"]) {
      out.files.push_back(
          {f["path"].get<std::string>(), f["size"].get<uint64_t>(), f["sha256"].get<std::string>()});
    }
    if (m.contains("sha512") && m["sha512"].is_object()) {
      for (const auto& [entry, digest] : m["sha512"].items()) out.sha512[entry] = digest.get<std::string>();
    }
    for (const json& mod : m["modules"]) out.modules.push_back(read_module(mod, out.format_version));
    return out;
  } catch (const std::exception& e) {
    return schema_disagrees("manifest.json", e);
  }
}

StatusOr<ManifestGraph> read_graph_spec(std::string_view text) {
  AITUNE_ASSIGN_OR_RETURN(json g, parse_graph_spec(text));
  try {
    return read_graph_fields(g);
  } catch (const std::exception& e) {
    return schema_disagrees("The graph spec", e);
  }
}

}  // namespace aitune
