#include "checkpoint/manifest_schema.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "checkpoint/backend_names.h"
#include "checkpoint/manifest_backend.h"
#include "checkpoint/schema_rules.h"
#include "checkpoint/state_schema.h"

namespace aitune {
namespace {

using json = nlohmann::json;
using namespace schema;  // NOLINT: the schema's building blocks

constexpr size_t kMaxRank = 64;           // tensor rank
constexpr size_t kMaxName = 255;          // bytes of a module or graph name (a folder name)
constexpr uint64_t kMaxDim = 1ULL << 48;  // any real tensor dimension is far below this

// A module prefix: "" or dot-separated attribute names (identifier characters or digits, as
// nn.Module child names are), none starting with "__": ait.load walks and assigns these
// attributes, so a dunder would reach into the object's machinery.
bool is_module_prefix(const std::string& p) {
  if (p.empty()) return true;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = std::min(p.find('.', start), p.size());
    const std::string part = p.substr(start, end - start);
    if (part.empty() || part.size() > kMaxName || starts_with(part, "__")) return false;
    if (!std::all_of(part.begin(), part.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; })) {
      return false;
    }
    start = end + 1;
  }
  return true;
}

bool is_identifier(const std::string& s) {
  return !s.empty() && s.size() <= kMaxName && !std::isdigit(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

const std::set<std::string>& dtype_names() {
  static const std::set<std::string> names = {"float32",
                                              "float64",
                                              "float16",
                                              "bfloat16",
                                              "complex64",
                                              "complex128",
                                              "int8",
                                              "int16",
                                              "int32",
                                              "int64",
                                              "uint8",
                                              "uint16",
                                              "uint32",
                                              "uint64",
                                              "bool",
                                              "float8_e4m3fn",
                                              "float8_e5m2",
                                              "float8_e4m3fnuz",
                                              "float8_e5m2fnuz",
                                              "float8_e8m0fnu",
                                              "float4_e2m1fn_x2",
                                              "complex32",
                                              "qint8",
                                              "quint8",
                                              "qint32"};
  return names;
}

// `expected`: the one entry ait.save writes a weights file to.
Status check_weights(const Context& ctx, const json& w, const std::string& where,
                     const std::string& expected) {
  const json* entry = nullptr;
  const json* aliases = nullptr;
  const json* extra = nullptr;
  AITUNE_RETURN_IF_ERROR(get(w, where, "entry", Kind::kString, &entry));
  AITUNE_RETURN_IF_ERROR(check_listed(ctx, where + ".entry", entry->get<std::string>(), ""));
  if (entry->get<std::string>() != expected) return bad(where + ".entry", "\"" + expected + "\"", *entry);
  AITUNE_RETURN_IF_ERROR(get(w, where, "aliases", Kind::kObject, &aliases));
  for (const auto& [name, target] : aliases->items()) {
    if (!target.is_string()) return bad(where + ".aliases[\"" + name + "\"]", "a string", target);
  }
  return get(w, where, "extra_state", Kind::kObject, &extra);
}

Status check_semantic_path(const json& v, const std::string& where) {
  if (v.is_string() || is_int64(v)) return Status::Ok();
  if (v.is_object() && v.size() == 1 && v.contains("tuple") && v["tuple"].is_array()) {
    for (const json& step : v["tuple"]) {
      if (!step.is_string() && !is_int64(step))
        return bad(where + ".tuple[]", "a string or a 64-bit integer", step);
    }
    return Status::Ok();
  }
  return bad(where, "a string, a 64-bit integer or {\"tuple\": [...]}", v);
}

Status check_int_list(const json& leaf, const std::string& where, const char* key, size_t rank,
                      bool allow_null, std::vector<int64_t>* out) {
  const json* list = nullptr;
  AITUNE_RETURN_IF_ERROR(get(leaf, where, key, Kind::kArray, &list));
  if (list->size() != rank)
    return bad(where + "." + key, "an array of " + std::to_string(rank) + " values", *list);
  out->clear();
  for (const json& d : *list) {
    if (d.is_null() && allow_null) {
      out->push_back(-1);
      continue;
    }
    if (!d.is_number_integer() || d.get<int64_t>() < 0 || static_cast<uint64_t>(d.get<int64_t>()) > kMaxDim) {
      return bad(where + "." + key + "[]", "a dimension (an integer from 0 to 2^48)", d);
    }
    out->push_back(d.get<int64_t>());
  }
  return Status::Ok();
}

// Returns the leaf's rank in `rank` (0 for a constant) and whether it is a tensor.
Status check_leaf(const json& leaf, const std::string& where, bool* is_tensor, size_t* rank) {
  if (!leaf.is_object()) return bad(where, "an object", leaf);
  const json* v = nullptr;
  if (!leaf.contains("semantic_path")) return bad_text(where + ".semantic_path", "is missing");
  AITUNE_RETURN_IF_ERROR(check_semantic_path(leaf["semantic_path"], where + ".semantic_path"));
  AITUNE_RETURN_IF_ERROR(get(leaf, where, "access_path", Kind::kString, &v));
  if (leaf.contains("value")) {  // a constant: its skeleton node (nesting is bounded by the document's)
    *is_tensor = false;
    *rank = 0;
    if (!leaf["value"].is_object())
      return bad(where + ".value", "a skeleton node (an object)", leaf["value"]);
    if (leaf.contains("needs_eq") && !leaf["needs_eq"].is_boolean())
      return bad(where + ".needs_eq", "true or false", leaf["needs_eq"]);
    return Status::Ok();
  }
  *is_tensor = true;
  AITUNE_RETURN_IF_ERROR(get(leaf, where, "name", Kind::kString, &v));
  const json* kinds = nullptr;
  AITUNE_RETURN_IF_ERROR(get(leaf, where, "axis_kinds", Kind::kArray, &kinds));
  if (kinds->size() > kMaxRank) return bad(where + ".axis_kinds", "at most 64 axes", *kinds);
  *rank = kinds->size();
  for (const json& k : *kinds) {
    if (!k.is_string() || (k != "static" && k != "batch" && k != "dim")) {
      return bad(where + ".axis_kinds[]", "\"static\", \"batch\" or \"dim\"", k);
    }
  }
  const json* shape = nullptr;
  AITUNE_RETURN_IF_ERROR(get(leaf, where, "shape", Kind::kArray, &shape));
  if (shape->size() != *rank)
    return bad(where + ".shape", "an array of " + std::to_string(*rank) + " axes", *shape);
  for (const json& d : *shape) {
    if (!d.is_string() && !d.is_number_integer())
      return bad(where + ".shape[]", "an integer or an axis name", d);
  }
  std::vector<int64_t> lo, hi;
  AITUNE_RETURN_IF_ERROR(check_int_list(leaf, where, "min_shape", *rank, false, &lo));
  AITUNE_RETURN_IF_ERROR(check_int_list(leaf, where, "max_shape", *rank, false, &hi));
  for (size_t i = 0; i < *rank; ++i) {
    if (lo[i] > hi[i])
      return bad_text(
          where, "has min_shape " + show(leaf["min_shape"]) + " above max_shape " + show(leaf["max_shape"]));
  }
  const json* multipliers = nullptr;
  AITUNE_RETURN_IF_ERROR(get(leaf, where, "multipliers", Kind::kArray, &multipliers));
  if (multipliers->size() != *rank)
    return bad(where + ".multipliers", "an array of " + std::to_string(*rank) + " values", *multipliers);
  for (const json& m : *multipliers) {
    if (!m.is_null() && !m.is_number()) return bad(where + ".multipliers[]", "a number or null", m);
  }
  const json* dtype = nullptr;
  AITUNE_RETURN_IF_ERROR(get(leaf, where, "dtype", Kind::kString, &dtype));
  if (!dtype_names().count(dtype->get<std::string>()))
    return bad(where + ".dtype", "a torch dtype name", *dtype);
  const json* dtypes = nullptr;
  AITUNE_RETURN_IF_ERROR(get(leaf, where, "dtypes", Kind::kArray, &dtypes));
  if (dtypes->empty() || dtypes->size() > 16) return bad(where + ".dtypes", "1 to 16 dtype names", *dtypes);
  for (const json& d : *dtypes) {
    if (!d.is_string() || !dtype_names().count(d.get<std::string>()))
      return bad(where + ".dtypes[]", "a torch dtype name", d);
  }
  return Status::Ok();
}

// Tensor leaves' ranks, in order; `leaf_ranks` (when given): every leaf's, -1 for a constant.
Status check_spec(const json& graph, const std::string& where, const char* key, std::vector<size_t>* ranks,
                  std::vector<int64_t>* leaf_ranks = nullptr) {
  const json* spec = nullptr;
  const json* leaves = nullptr;
  AITUNE_RETURN_IF_ERROR(get(graph, where, key, Kind::kObject, &spec));
  AITUNE_RETURN_IF_ERROR(get(*spec, where + "." + key, "leaves", Kind::kArray, &leaves));
  ranks->clear();
  std::set<std::string> paths;
  for (size_t i = 0; i < leaves->size(); ++i) {
    bool tensor = false;
    size_t rank = 0;
    const std::string at = where + "." + key + ".leaves[" + std::to_string(i) + "]";
    AITUNE_RETURN_IF_ERROR(check_leaf((*leaves)[i], at, &tensor, &rank));
    // One leaf per path: the dispatcher pairs leaves with the call's by position.
    if (!paths.insert((*leaves)[i]["semantic_path"].dump()).second) {
      return bad_text(at + ".semantic_path", show((*leaves)[i]["semantic_path"]) + " appears twice");
    }
    if (tensor) ranks->push_back(rank);
    if (leaf_ranks) leaf_ranks->push_back(tensor ? static_cast<int64_t>(rank) : -1);
  }
  return Status::Ok();
}

// The graph's own fields, as graph_to_json writes them: name, llm_phase, key_tokens and the two
// specs (tensor leaves' ranks in `inputs` and `outputs`).
Status check_graph_spec(const json& g, const std::string& where, std::vector<size_t>* inputs,
                        std::vector<size_t>* outputs) {
  if (!g.is_object()) return bad(where, "an object", g);
  const json* name = nullptr;
  AITUNE_RETURN_IF_ERROR(get(g, where, "name", Kind::kString, &name));
  if (!is_safe_name(name->get<std::string>()))
    return bad(where + ".name", "a graph name usable as a folder name", *name);
  std::string phase;
  if (g.contains("llm_phase"))
    AITUNE_RETURN_IF_ERROR(get_string_in(g, where, "llm_phase", {"prefill", "decode"}, &phase, true));
  const json* tokens = nullptr;
  AITUNE_RETURN_IF_ERROR(get(g, where, "key_tokens", Kind::kArray, &tokens));
  if (tokens->size() > (1u << 20)) return bad_text(where + ".key_tokens", "has more than 2^20 tokens");
  for (const json& t : *tokens) {
    if (!is_uint64(t)) return bad(where + ".key_tokens[]", "an integer from 0 to 2^64-1", t);
  }
  std::vector<int64_t> leaf_ranks;
  AITUNE_RETURN_IF_ERROR(check_spec(g, where, "input_spec", inputs, &leaf_ranks));
  AITUNE_RETURN_IF_ERROR(check_spec(g, where, "output_spec", outputs));
  return check_key_tokens(*tokens, leaf_ranks, phase, where);
}

Status check_graph(const Context& ctx, const json& g, const std::string& where,
                   const std::string& module_folder, std::set<std::string>* names, bool* is_jit) {
  std::vector<size_t> inputs, outputs;
  AITUNE_RETURN_IF_ERROR(check_graph_spec(g, where, &inputs, &outputs));
  const std::string n = g["name"].get<std::string>();
  if (!names->insert(n).second) return bad_text(where + ".name", "'" + n + "' appears twice in the module");
  const std::string folder = module_folder + "/graphs/" + n;
  AITUNE_RETURN_IF_ERROR(check_backend(ctx, g, where, folder, inputs, outputs.size(), is_jit));
  const json* samples = nullptr;
  AITUNE_RETURN_IF_ERROR(get(g, where, "samples", Kind::kArray, &samples));
  for (const json& s : *samples) {
    if (!s.is_string()) return bad(where + ".samples[]", "an entry prefix", s);
    for (const char* suffix : {".safetensors", ".json"}) {
      AITUNE_RETURN_IF_ERROR(
          check_listed(ctx, where + ".samples[]", s.get<std::string>() + suffix, folder + "/samples/"));
    }
  }
  return Status::Ok();
}

// `results_store`: a file of the tuning-results store ("kind": "aitune.results"), which never
// holds weights: its key pins them to the live module's (ait.load refuses such files).
Status check_module(const Context& ctx, const json& m, size_t index, bool results_store,
                    std::set<std::string>* names, std::set<std::string>* prefixes) {
  const std::string where = "modules[" + std::to_string(index) + "]";
  if (!m.is_object()) return bad(where, "an object", m);
  const json* v = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, where, "name", Kind::kString, &v));
  const std::string name = v->get<std::string>();
  if (!is_safe_name(name)) return bad(where + ".name", "a module name usable as a folder name", *v);
  if (!names->insert(name).second) return bad_text(where + ".name", "'" + name + "' appears twice");
  AITUNE_RETURN_IF_ERROR(get(m, where, "prefix", Kind::kString, &v));
  if (!is_module_prefix(v->get<std::string>()))
    return bad(where + ".prefix", "\"\" or dotted attribute names", *v);
  if (!prefixes->insert(v->get<std::string>()).second)
    return bad_text(where + ".prefix", "'" + v->get<std::string>() + "' appears twice");
  AITUNE_RETURN_IF_ERROR(get(m, where, "class", Kind::kString, &v));
  AITUNE_RETURN_IF_ERROR(get(m, where, "strict_mode", Kind::kBool, &v));
  std::string policy;
  AITUNE_RETURN_IF_ERROR(get_string_in(m, where, "fallback_policy", {"raise", "eager"}, &policy));
  const std::string folder = "modules/" + std::to_string(index);
  const json* weights = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, where, "weights", Kind::kObject, &weights, /*nullable=*/true));
  if (weights)
    AITUNE_RETURN_IF_ERROR(check_weights(ctx, *weights, where + ".weights", folder + "/weights.safetensors"));
  const json* signature = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, where, "forward_signature", Kind::kArray, &signature));
  for (size_t i = 0; i < signature->size(); ++i) {
    const json& p = (*signature)[i];
    const std::string at = where + ".forward_signature[" + std::to_string(i) + "]";
    if (!p.is_object()) return bad(at, "an object", p);
    AITUNE_RETURN_IF_ERROR(get(p, at, "name", Kind::kString, &v));
    if (!is_identifier(v->get<std::string>())) return bad(at + ".name", "a Python parameter name", *v);
    std::string kind;
    AITUNE_RETURN_IF_ERROR(get_string_in(
        p, at, "kind",
        {"POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD"},
        &kind));
    AITUNE_RETURN_IF_ERROR(get(p, at, "has_default", Kind::kBool, &v));
  }
  const json* graphs = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, where, "graphs", Kind::kArray, &graphs));
  if (graphs->empty()) return bad_text(where + ".graphs", "is empty: a tuned module has at least one graph");
  std::set<std::string> graph_names;
  bool needs_weights = policy == "eager";
  for (size_t i = 0; i < graphs->size(); ++i) {
    bool jit = false;
    AITUNE_RETURN_IF_ERROR(check_graph(ctx, (*graphs)[i], where + ".graphs[" + std::to_string(i) + "]",
                                       folder, &graph_names, &jit));
    needs_weights = needs_weights || jit;
  }
  if (needs_weights && !weights && !results_store) {
    return bad_text(where + ".weights",
                    "is null, but the module's " +
                        std::string(policy == "eager" ? "eager fallback" : "JIT or eager backends") +
                        " serve its weights, which a checkpoint then always holds");
  }
  return Status::Ok();
}

}  // namespace

Status check_json_nesting(std::string_view text, int max_depth, std::string_view what) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return {StatusCode::kCorrupt, std::string(what) + " is corrupt: it nests deeper than " +
                                          std::to_string(max_depth) + " levels (at byte " +
                                          std::to_string(i) + ")"};
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return Status::Ok();
}

bool is_safe_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxName || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return c >= 0x20 && c < 0x7F && c != '/' && c != '\\'; });
}

StatusOr<nlohmann::json> parse_manifest(std::string_view text) {
  AITUNE_RETURN_IF_ERROR(check_json_nesting(text));
  json manifest = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded())
    return Status(StatusCode::kCorrupt, "manifest.json is corrupt: it is not valid JSON");
  AITUNE_RETURN_IF_ERROR(validate_manifest(manifest));
  return manifest;
}

StatusOr<nlohmann::json> parse_graph_spec(std::string_view text) {
  AITUNE_RETURN_IF_ERROR(check_json_nesting(text, kMaxJsonNesting, "graph spec"));
  json graph = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (graph.is_discarded())
    return Status(StatusCode::kCorrupt, "graph spec is corrupt: it is not valid JSON");
  std::vector<size_t> inputs, outputs;
  const Status checked = check_graph_spec(graph, "graph", &inputs, &outputs);
  if (!checked.ok()) {
    // bad() words every message for manifest.json; this text is a graph on its own.
    constexpr std::string_view kManifest = "manifest.json is corrupt: ";
    std::string message = checked.message();
    if (message.rfind(kManifest, 0) == 0)
      message = "graph spec is corrupt: " + message.substr(kManifest.size());
    return Status(checked.code(), message);
  }
  return graph;
}

Status validate_manifest(const json& m) {
  if (!m.is_object()) return bad("manifest", "a JSON object", m);
  const auto format = m.find("format");
  if (format == m.end() || *format != kManifestFormat) {
    return unsupported("This is not an aitune checkpoint (format " +
                       (format == m.end() ? std::string("missing") : show(*format)) + ")");
  }
  const auto version = m.find("format_version");
  if (version == m.end() || !version->is_number_integer() || version->get<int64_t>() < kManifestFormatMin ||
      version->get<int64_t>() > kManifestFormatMax) {
    return unsupported("Unsupported checkpoint format_version " +
                       (version == m.end() ? std::string("(missing)") : show(*version)) +
                       " (this aitune reads " + std::to_string(kManifestFormatMin) + " and " +
                       std::to_string(kManifestFormatMax) + ")");
  }
  const json* v = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, "manifest", "aitune_version", Kind::kString, &v));
  AITUNE_RETURN_IF_ERROR(get(m, "manifest", "created_at", Kind::kString, &v));
  const json* fingerprint = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, "manifest", "fingerprint", Kind::kObject, &fingerprint));
  for (const auto& [key, value] : fingerprint->items()) {
    if (value.is_object() || value.is_array())
      return bad("fingerprint." + key, "a string, a number or null", value);
  }
  if (m.contains("config")) AITUNE_RETURN_IF_ERROR(get(m, "manifest", "config", Kind::kObject, &v));
  Context ctx;
  ctx.format_version = version->get<int64_t>();
  AITUNE_RETURN_IF_ERROR(check_files(m, &ctx));
  AITUNE_RETURN_IF_ERROR(check_sha512(m, ctx));
  const json* root = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, "manifest", "root", Kind::kObject, &root));
  std::string root_kind;
  AITUNE_RETURN_IF_ERROR(get_string_in(*root, "root", "kind", {"module", "pipeline"}, &root_kind));
  AITUNE_RETURN_IF_ERROR(get(*root, "root", "class", Kind::kString, &v));
  const json* weights = nullptr;
  AITUNE_RETURN_IF_ERROR(get(*root, "root", "weights", Kind::kObject, &weights, /*nullable=*/true));
  if (weights)
    AITUNE_RETURN_IF_ERROR(check_weights(ctx, *weights, "root.weights", "weights/root.safetensors"));
  const json* modules = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, "manifest", "modules", Kind::kArray, &modules));
  if (modules->empty()) return bad_text("modules", "is empty: a checkpoint holds at least one tuned module");
  std::string kind;
  if (m.contains("kind"))
    AITUNE_RETURN_IF_ERROR(get_string_in(m, "manifest", "kind", {kManifestResultsKind}, &kind));
  if (m.contains("results_key")) AITUNE_RETURN_IF_ERROR(get(m, "manifest", "results_key", Kind::kString, &v));
  std::set<std::string> names, prefixes;
  for (size_t i = 0; i < modules->size(); ++i) {
    AITUNE_RETURN_IF_ERROR(
        check_module(ctx, (*modules)[i], i, kind == kManifestResultsKind, &names, &prefixes));
  }
  return Status::Ok();
}

}  // namespace aitune
