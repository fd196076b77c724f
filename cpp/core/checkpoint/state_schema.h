// Encoded backend states and LocalTorchStorage state dicts
// (docs/reference/checkpoint.md#own-state-backends-and-state-dicts): the JSON skeleton an own-state backend's
// to_dict() (or LocalTorchStorage.save's state dict) is stored as, and the manifest of a state-dict file.
// Like manifest_schema.h, hostile input: every node is checked for its form, and every artifact a state names
// must be a listed file (or a folder of listed files) under the folder its writer puts artifacts in, so no
// field can point a loader outside the archive.
//
// Errors: kCorrupt naming the JSON path, the expected and the actual value; kUnsupported for a
// file that is not a state dict or has another format version.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "checkpoint/schema_rules.h"
#include "common/status.h"

namespace aitune {

inline constexpr const char* kStateDictFormat = "aitune.state_dict";
inline constexpr int kStateDictFormatVersion = 1;
// Where LocalTorchStorage.save puts a state dict's tensors and artifacts.
inline constexpr const char* kStateDictFolder = "state/";

// One node of an encoded state and everything under it. Nodes are objects of one form:
// {"artifact": {"folder", "relative_path"}}, {"path": str}, {"device": str}, {"dtype": str},
// {"list"|"tuple": [node]}, {"dict": [[str|int, node]]}, {"tensor": str}, {"value": scalar},
// {"float": str}, {"namedtuple": str, "items": [node]}, {"mapping": str, "items": [[key, node]]},
// {"dataclass": str, "fields": {name: node}}. An artifact's folder must be an entry path under
// `artifacts_folder` and its relative path "." or a relative entry path, together naming a
// listed file or a folder holding one. Recursion is bounded by the document's nesting check.
Status check_state_node(const schema::Context& ctx, const nlohmann::json& node, const std::string& where,
                        const std::string& artifacts_folder);

// Validates a parsed state-dict manifest: format, format_version 1, sha_type "256" or "512"
// (then a SHA-512 for every listed file), files, state, state_tensors (null or a listed entry
// under state/) and artifacts (listed entries under state/).
Status validate_state_manifest(const nlohmann::json& manifest);

// Nesting check, parse and validate_state_manifest in one.
StatusOr<nlohmann::json> parse_state_manifest(std::string_view text);

}  // namespace aitune
