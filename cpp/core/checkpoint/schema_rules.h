// The building blocks of the manifest schemas (manifest_schema.h for `.ait` checkpoints,
// state_schema.h for LocalTorchStorage state dicts and own-state backends): typed field access
// with errors naming the JSON path, the entry-path rule, and the file list every reference is
// checked against. Internal to cpp/core/checkpoint.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "checkpoint/backend_names.h"
#include "common/status.h"

namespace aitune::schema {

using json = nlohmann::json;

// `v` as JSON text, at most 80 characters (for messages).
std::string show(const json& v);

// kCorrupt "manifest.json is corrupt: <where> must be <expected>, got <actual>".
Status bad(const std::string& where, const std::string& expected, const json& actual);
// kCorrupt "manifest.json is corrupt: <where> <problem>".
Status bad_text(const std::string& where, const std::string& problem);

enum class Kind { kObject, kArray, kString, kBool, kInt, kNumber, kAny };

// `obj[key]` of the given kind (or null when `nullable`); `out` points at it (or is null for a
// null value).
Status get(const json& obj, const std::string& where, const char* key, Kind kind, const json** out,
           bool nullable = false);

// `obj[key]`, a string among `allowed` (or null when `nullable`: `out` is then empty).
Status get_string_in(const json& obj, const std::string& where, const char* key,
                     std::initializer_list<const char*> allowed, std::string* out, bool nullable = false);

// An archive entry path as the writer makes them: relative, '/'-separated, no empty, '.' or '..'
// component, no '\\' or NUL, not manifest.json (the ArchiveReader enforces the same on the
// archive's own names).
bool is_entry_path(const std::string& p);

bool is_hex64(const std::string& s);
// An integer the typed manifest holds as int64_t (nlohmann keeps a non-negative one as unsigned).
bool is_int64(const json& v);
// An integer the typed manifest holds as uint64_t.
bool is_uint64(const json& v);
bool starts_with(const std::string& s, const std::string& prefix);

// What the rest of a manifest needs to check its references.
struct Context {
  std::unordered_set<std::string> files;  // listed entry paths
  int64_t format_version = kManifestFormatMax;
};

// `entry` is a listed file and starts with `folder` ("" for anywhere).
Status check_listed(const Context& ctx, const std::string& where, const std::string& entry,
                    const std::string& folder);

// `manifest.files`: an array of {path, size, sha256}, each path an entry path listed once and
// not a name the extraction cache reserves (entry_name.h); fills `ctx->files`.
Status check_files(const json& manifest, Context* ctx);

// `manifest.sha512` (LocalTorchStorage(sha_type="512")): absent, null or an object mapping listed
// entries to 128 hex digits.
Status check_sha512(const json& manifest, const Context& ctx);

// `<where>.key_tokens` (spec/graph_key.cc) against the graph they name (`leaf_ranks`: each input
// leaf's rank, -1 for a constant; `phase`: its llm_phase or ""): a key that no call of this graph
// can produce would load and then refuse every call (GraphNotFound). Tokens come in pairs, a tag
// (low 8 bits; a container's kind above them) and a payload. An LLM graph's key is its phase
// alone; any other opens with the arguments container, and its leaf tokens (a tensor's rank, a
// value's hash) follow the input spec's leaves in order. Without a stored sample the key's names
// and counts cannot be recomputed (Python's ait.load recomputes the whole key from one).
Status check_key_tokens(const json& tokens, const std::vector<int64_t>& leaf_ranks, const std::string& phase,
                        const std::string& where);

}  // namespace aitune::schema
