// A graph's backend entry (`modules[].graphs[].backend`, docs/reference/checkpoint.md#layout-and-manifest):
// its schema check, its reader, and the table of its fields as the typed manifest exposes them.
// The one C++ file that names the entry's keys (struct ManifestBackend in manifest.h holds the
// values; checkpoint/entry_writer.py writes them), so a field is added in those three places.
// Internal to cpp/core/checkpoint, except backend_fields() (the Python bindings expose it).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "checkpoint/schema_rules.h"
#include "common/status.h"

namespace aitune {

// `graph.backend` of a manifest (format 1 or 2: ctx.format_version) against the graph it serves:
// `folder` is the graph's folder ("modules/0/graphs/0"), `input_ranks` its tensor inputs' ranks,
// `num_outputs` its tensor outputs; `is_jit` receives the entry's flag.
Status check_backend(const schema::Context& ctx, const nlohmann::json& graph, const std::string& where,
                     const std::string& folder, const std::vector<size_t>& input_ranks, size_t num_outputs,
                     bool* is_jit);

// A checked entry as the typed struct (format 1: the class path mapped to a stable name).
ManifestBackend read_backend(const nlohmann::json& entry, int format_version);

// One field of a backend entry as readers outside C++ see it: `key` is the attribute name
// (`_C.ManifestBackend.<key>`), `json` the value as JSON text (a config or state as stored;
// absent parts as null; a profile as [min, max] or null).
struct BackendField {
  const char* key;
  std::string (*json)(const ManifestBackend&);
};

// Every field, in the order the writer stores them.
const std::vector<BackendField>& backend_fields();

// `obj[key]` as JSON text; `absent` when the key is missing.
std::string json_text(const nlohmann::json& obj, const char* key, const char* absent = "null");

// `obj[key]` when it is a string; nullopt when it is null or missing.
std::optional<std::string> optional_string(const nlohmann::json& obj, const char* key);

}  // namespace aitune
