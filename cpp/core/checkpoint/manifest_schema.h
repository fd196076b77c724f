// The checkpoint manifest's schema (docs/guide.md, "Checkpoints" and "Threat model"): the one
// check that Python's ait.load and the C++ runtime both run on manifest.json before using any of
// it. A manifest is hostile input: every field is checked for type, range and nesting, names that
// become paths are checked against the name rule, and every file the manifest refers to (weights,
// samples, backend artifacts) must be a listed entry under its own module's and graph's folder.
//
// Errors: kCorrupt naming the JSON path, the expected and the actual value; kUnsupported for a
// file that is not an aitune checkpoint or has another format version.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace aitune {

// manifest.json's "format" (its versions: kManifestFormatMin/Max, backend_names.h); Python writes
// what `_C.MANIFEST_FORMAT` says, so the two cannot drift.
inline constexpr const char* kManifestFormat = "aitune.checkpoint";
// The "kind" of a results-store file (results/store.py writes `_C.MANIFEST_RESULTS_KIND`).
inline constexpr const char* kManifestResultsKind = "aitune.results";

// Deepest nesting of arrays and objects accepted in a manifest or sample skeleton. aitune writes
// at most ~12; nlohmann and Python's json recurse per level, so a document nested 80,000 levels
// deep would overflow the stack before any schema check ran.
inline constexpr int kMaxJsonNesting = 64;

// kCorrupt when `text` nests arrays/objects deeper than `max_depth` (strings are skipped, so
// brackets inside them do not count). Linear, no recursion, no allocation.
Status check_json_nesting(std::string_view text, int max_depth = kMaxJsonNesting,
                          std::string_view what = "manifest.json");

// A module or graph name: it becomes a folder name in caches. 1-255 bytes, printable ASCII
// without '/', '\\' or NUL, and not "." or "..".
bool is_safe_name(std::string_view name);

// Nesting check, parse and validate_manifest in one: the manifest ready to use.
StatusOr<nlohmann::json> parse_manifest(std::string_view text);

// Nesting check, parse, and the checks validate_manifest makes of a graph's own fields (name,
// llm_phase, key_tokens, input_spec, output_spec), for one graph as graph_to_json writes it.
StatusOr<nlohmann::json> parse_graph_spec(std::string_view text);

// Validates a parsed manifest (format version 1 or 2: backend_names.h). Does not touch the archive: that
// every listed file exists with its size and hash is the ArchiveReader's check.
Status validate_manifest(const nlohmann::json& manifest);

}  // namespace aitune
