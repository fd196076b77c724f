#include "checkpoint/state_schema.h"

#include <string>

#include "checkpoint/manifest_schema.h"

namespace aitune {
namespace {

using json = nlohmann::json;
using namespace schema;  // NOLINT: the schema's building blocks

// An artifact's relative path inside its folder: "." (the folder itself) or an entry path.
bool is_relative_path(const std::string& p) { return p == "." || is_entry_path(p); }

// Some listed file is `path` or lies under the folder `path`.
bool names_listed(const Context& ctx, const std::string& path) {
  if (ctx.files.count(path)) return true;
  const std::string folder = path + "/";
  for (const std::string& f : ctx.files) {
    if (starts_with(f, folder)) return true;
  }
  return false;
}

Status check_artifact(const Context& ctx, const json& spec, const std::string& where,
                      const std::string& artifacts_folder) {
  if (!spec.is_object() || spec.size() != 2)
    return bad(where, "{\"folder\": ..., \"relative_path\": ...}", spec);
  const json* folder = nullptr;
  const json* relative = nullptr;
  AITUNE_RETURN_IF_ERROR(get(spec, where, "folder", Kind::kString, &folder));
  AITUNE_RETURN_IF_ERROR(get(spec, where, "relative_path", Kind::kString, &relative));
  const std::string f = folder->get<std::string>(), r = relative->get<std::string>();
  if (!is_entry_path(f) || !starts_with(f, artifacts_folder))
    return bad(where + ".folder", "an entry folder under " + artifacts_folder, *folder);
  if (!is_relative_path(r))
    return bad(where + ".relative_path", "a relative path inside its folder", *relative);
  const std::string path = r == "." ? f : f + "/" + r;
  if (!names_listed(ctx, path))
    return bad_text(where,
                    "names '" + path + "', which is neither a listed file nor a folder of listed files");
  return Status::Ok();
}

// [[key, node], ...] with str or int keys (a dict's or a Mapping's items).
Status check_pairs(const Context& ctx, const json& items, const std::string& where,
                   const std::string& folder) {
  if (!items.is_array()) return bad(where, "an array of [key, node] pairs", items);
  for (size_t i = 0; i < items.size(); ++i) {
    const json& pair = items[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!pair.is_array() || pair.size() != 2 || !(pair[0].is_string() || is_int64(pair[0])))
      return bad(at, "a [str or int key, node] pair", pair);
    AITUNE_RETURN_IF_ERROR(check_state_node(ctx, pair[1], at + "[1]", folder));
  }
  return Status::Ok();
}

Status check_nodes(const Context& ctx, const json& items, const std::string& where,
                   const std::string& folder) {
  if (!items.is_array()) return bad(where, "an array of nodes", items);
  for (size_t i = 0; i < items.size(); ++i)
    AITUNE_RETURN_IF_ERROR(check_state_node(ctx, items[i], where + "[" + std::to_string(i) + "]", folder));
  return Status::Ok();
}

// A node that is {"<key>": <string>}.
bool is_string_node(const json& node, const char* key) {
  return node.size() == 1 && node.contains(key) && node[key].is_string();
}

}  // namespace

Status check_state_node(const Context& ctx, const json& node, const std::string& where,
                        const std::string& artifacts_folder) {
  constexpr const char* kForms =
      "a state node: {\"artifact\"}, {\"path\"}, {\"device\"}, {\"dtype\"}, {\"list\"}, {\"tuple\"}, "
      "{\"dict\"}, "
      "{\"tensor\"}, {\"value\"}, {\"float\"}, {\"namedtuple\", \"items\"}, {\"mapping\", \"items\"} or "
      "{\"dataclass\", \"fields\"}";
  if (!node.is_object() || node.empty()) return bad(where, kForms, node);
  if (node.size() == 1) {
    const auto only = node.begin();
    const std::string key = only.key();
    const json& value = only.value();
    const std::string at = where + "." + key;
    if (key == "artifact") return check_artifact(ctx, value, at, artifacts_folder);
    if (key == "list" || key == "tuple") return check_nodes(ctx, value, at, artifacts_folder);
    if (key == "dict") return check_pairs(ctx, value, at, artifacts_folder);
    if (key == "value") {
      if (value.is_object() || value.is_array())
        return bad(at, "null, true, false, a number or a string", value);
      return Status::Ok();
    }
    for (const char* string_key : {"path", "device", "dtype", "tensor", "float"}) {
      if (key == string_key)
        return is_string_node(node, string_key) ? Status::Ok() : bad(at, "a string", value);
    }
    return bad(where, kForms, node);
  }
  if (node.size() == 2 && node.contains("items") &&
      (node.contains("namedtuple") || node.contains("mapping"))) {
    const bool mapping = node.contains("mapping");
    const char* type_key = mapping ? "mapping" : "namedtuple";
    if (!node[type_key].is_string()) return bad(where + "." + type_key, "a class name", node[type_key]);
    return mapping ? check_pairs(ctx, node["items"], where + ".items", artifacts_folder)
                   : check_nodes(ctx, node["items"], where + ".items", artifacts_folder);
  }
  if (node.size() == 2 && node.contains("dataclass") && node.contains("fields")) {
    if (!node["dataclass"].is_string()) return bad(where + ".dataclass", "a class name", node["dataclass"]);
    const json& fields = node["fields"];
    if (!fields.is_object()) return bad(where + ".fields", "an object of field nodes", fields);
    for (const auto& [name, field] : fields.items())
      AITUNE_RETURN_IF_ERROR(check_state_node(ctx, field, where + ".fields." + name, artifacts_folder));
    return Status::Ok();
  }
  return bad(where, kForms, node);
}

Status validate_state_manifest(const json& m) {
  if (!m.is_object()) return bad("manifest", "a JSON object", m);
  const auto format = m.find("format");
  if (format == m.end() || *format != kStateDictFormat) {
    return unsupported("This is not a state dict saved by LocalTorchStorage.save (format " +
                       (format == m.end() ? std::string("missing") : show(*format)) +
                       "); load tuned modules with ait.load");
  }
  const auto version = m.find("format_version");
  if (version == m.end() || !version->is_number_integer() ||
      version->get<int64_t>() != kStateDictFormatVersion) {
    return unsupported("Unsupported state dict format_version " +
                       (version == m.end() ? std::string("(missing)") : show(*version)) +
                       " (this aitune reads " + std::to_string(kStateDictFormatVersion) + ")");
  }
  std::string sha_type;
  AITUNE_RETURN_IF_ERROR(get_string_in(m, "manifest", "sha_type", {"256", "512"}, &sha_type));
  Context ctx;
  AITUNE_RETURN_IF_ERROR(check_files(m, &ctx));
  AITUNE_RETURN_IF_ERROR(check_sha512(m, ctx));
  if (sha_type == "512") {  // every entry, or a dropped digest would skip its check
    const json* sha512 = nullptr;
    AITUNE_RETURN_IF_ERROR(get(m, "manifest", "sha512", Kind::kObject, &sha512));
    for (const std::string& f : ctx.files) {
      if (!sha512->contains(f))
        return bad_text("sha512", "has no digest of '" + f + "' (sha_type is \"512\")");
    }
  }
  if (!m.contains("state")) return bad_text("manifest.state", "is missing");
  AITUNE_RETURN_IF_ERROR(check_state_node(ctx, m["state"], "state", kStateDictFolder));
  const json* tensors = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, "manifest", "state_tensors", Kind::kString, &tensors, /*nullable=*/true));
  if (tensors)
    AITUNE_RETURN_IF_ERROR(check_listed(ctx, "state_tensors", tensors->get<std::string>(), kStateDictFolder));
  const json* artifacts = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, "manifest", "artifacts", Kind::kObject, &artifacts));
  for (const auto& [key, entry] : artifacts->items()) {
    const std::string at = "artifacts[\"" + key + "\"]";
    if (!entry.is_string()) return bad(at, "an entry path", entry);
    AITUNE_RETURN_IF_ERROR(check_listed(ctx, at, entry.get<std::string>(), kStateDictFolder));
  }
  return Status::Ok();
}

StatusOr<json> parse_state_manifest(std::string_view text) {
  AITUNE_RETURN_IF_ERROR(check_json_nesting(text));
  json manifest = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded())
    return Status(StatusCode::kCorrupt, "manifest.json is corrupt: it is not valid JSON");
  AITUNE_RETURN_IF_ERROR(validate_state_manifest(manifest));
  return manifest;
}

}  // namespace aitune
