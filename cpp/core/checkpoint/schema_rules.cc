#include "checkpoint/schema_rules.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/entry_name.h"

namespace aitune::schema {
namespace {

bool is(const json& v, Kind kind) {
  switch (kind) {
    case Kind::kObject: return v.is_object();
    case Kind::kArray: return v.is_array();
    case Kind::kString: return v.is_string();
    case Kind::kBool: return v.is_boolean();
    case Kind::kInt: return v.is_number_integer();
    case Kind::kNumber: return v.is_number();
    case Kind::kAny: return true;
  }
  return false;
}

const char* kind_text(Kind kind) {
  switch (kind) {
    case Kind::kObject: return "an object";
    case Kind::kArray: return "an array";
    case Kind::kString: return "a string";
    case Kind::kBool: return "true or false";
    case Kind::kInt: return "an integer";
    case Kind::kNumber: return "a number";
    case Kind::kAny: return "a value";
  }
  return "a value";
}

}  // namespace

std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

Status bad(const std::string& where, const std::string& expected, const json& actual) {
  return {StatusCode::kCorrupt,
          "manifest.json is corrupt: " + where + " must be " + expected + ", got " + show(actual)};
}

Status bad_text(const std::string& where, const std::string& problem) {
  return {StatusCode::kCorrupt, "manifest.json is corrupt: " + where + " " + problem};
}

// `obj[key]` of the given kind (or null when `nullable`); `out` points at it (or is null for a
// null value).
Status get(const json& obj, const std::string& where, const char* key, Kind kind, const json** out,
           bool nullable) {
  const std::string at = where + "." + key;
  const auto it = obj.find(key);
  if (it == obj.end()) return bad_text(at, "is missing");
  if (it->is_null() && nullable) {
    *out = nullptr;
    return Status::Ok();
  }
  if (!is(*it, kind)) return bad(at, std::string(kind_text(kind)) + (nullable ? " or null" : ""), *it);
  *out = &*it;
  return Status::Ok();
}

Status get_string_in(const json& obj, const std::string& where, const char* key,
                     std::initializer_list<const char*> allowed, std::string* out, bool nullable) {
  const json* v = nullptr;
  AITUNE_RETURN_IF_ERROR(get(obj, where, key, Kind::kString, &v, nullable));
  if (v == nullptr) {
    out->clear();
    return Status::Ok();
  }
  const std::string s = v->get<std::string>();
  std::string list;
  for (const char* a : allowed) {
    if (s == a) {
      *out = s;
      return Status::Ok();
    }
    list += (list.empty() ? "" : ", ") + std::string("\"") + a + "\"";
  }
  return bad(where + "." + key, "one of " + list, *v);
}

// An archive entry path as the writer makes them: relative, '/'-separated, no empty, '.' or '..'
// component (the ArchiveReader enforces the same on the archive's own names).
bool is_entry_path(const std::string& p) {
  if (p.empty() || p.size() > 4096 || p.front() == '/' || p == "manifest.json") return false;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = std::min(p.find('/', start), p.size());
    const std::string_view part(p.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return std::none_of(p.begin(), p.end(), [](char c) { return c == '\\' || c == '\0'; });
}

bool is_hex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c); });
}

// An integer the typed manifest holds as int64_t (nlohmann keeps a non-negative one as unsigned).
bool is_int64(const json& v) {
  return v.is_number_integer() &&
         !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX));
}

// An integer the typed manifest holds as uint64_t.
bool is_uint64(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

Status check_listed(const Context& ctx, const std::string& where, const std::string& entry,
                    const std::string& folder) {
  if (!ctx.files.count(entry)) return bad_text(where, "names '" + entry + "', which is not a listed file");
  if (!starts_with(entry, folder))
    return bad_text(where, "names '" + entry + "', which is outside " + folder);
  return Status::Ok();
}

Status check_files(const json& manifest, Context* ctx) {
  const json* files = nullptr;
  AITUNE_RETURN_IF_ERROR(get(manifest, "manifest", "files", Kind::kArray, &files));
  for (size_t i = 0; i < files->size(); ++i) {
    const json& f = (*files)[i];
    const std::string at = "files[" + std::to_string(i) + "]";
    if (!f.is_object()) return bad(at, "an object", f);
    const json* v = nullptr;
    AITUNE_RETURN_IF_ERROR(get(f, at, "path", Kind::kString, &v));
    const std::string path = v->get<std::string>();
    if (!is_entry_path(path)) return bad(at + ".path", "a relative entry path", *v);
    if (zip::is_reserved_entry_name(path))
      return bad_text(at + ".path",
                      "'" + path + "' is a name the extraction cache reserves for its own files");
    if (!ctx->files.insert(path).second) return bad_text(at + ".path", "'" + path + "' is listed twice");
    AITUNE_RETURN_IF_ERROR(get(f, at, "size", Kind::kInt, &v));
    if (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() < 0)
      return bad(at + ".size", "a size in bytes", *v);
    AITUNE_RETURN_IF_ERROR(get(f, at, "sha256", Kind::kString, &v));
    if (!is_hex64(v->get<std::string>())) return bad(at + ".sha256", "64 hex digits", *v);
  }
  return Status::Ok();
}

Status check_sha512(const json& m, const Context& ctx) {
  if (!m.contains("sha512") || m["sha512"].is_null()) return Status::Ok();
  const json* sha512 = nullptr;
  AITUNE_RETURN_IF_ERROR(get(m, "manifest", "sha512", Kind::kObject, &sha512));
  for (const auto& [entry, digest] : sha512->items()) {
    AITUNE_RETURN_IF_ERROR(check_listed(ctx, "sha512", entry, ""));
    const std::string hex = digest.is_string() ? digest.get<std::string>() : std::string();
    if (hex.size() != 128 ||
        !std::all_of(hex.begin(), hex.end(), [](unsigned char c) { return std::isxdigit(c); })) {
      return bad("sha512[\"" + entry + "\"]", "128 hex digits", digest);
    }
  }
  return Status::Ok();
}

Status check_key_tokens(const json& tokens, const std::vector<int64_t>& leaf_ranks, const std::string& phase,
                        const std::string& where) {
  const std::string at = where + ".key_tokens";
  auto mismatch = [&](const std::string& problem) {
    return bad_text(at, "do not match the graph's input spec: " + problem);
  };
  if (tokens.size() % 2 != 0)
    return mismatch("an odd number of tokens (" + std::to_string(tokens.size()) + ")");
  enum : uint64_t { kContainer = 1, kKey, kIndex, kTensor, kValue, kOpaque, kLlmPhase };
  std::vector<std::pair<uint64_t, uint64_t>> pairs;
  for (size_t i = 0; i < tokens.size(); i += 2) {
    const uint64_t tag = tokens[i].get<uint64_t>(), payload = tokens[i + 1].get<uint64_t>();
    const uint64_t kind = tag & 0xFF, extra = tag >> 8;
    if (kind < kContainer || kind > kLlmPhase || (kind == kContainer ? extra < 1 || extra > 4 : extra != 0))
      return mismatch("token " + std::to_string(i) + " (" + std::to_string(tag) + ") is not a key element");
    pairs.emplace_back(kind, payload);
  }
  if (pairs.size() == 1 && pairs[0].first == kLlmPhase) {
    const std::string saved = pairs[0].second == 1 ? "prefill" : pairs[0].second == 0 ? "decode" : "";
    if (saved.empty() || saved != phase)
      return mismatch("an LLM phase key (" + std::to_string(pairs[0].second) + ") for llm_phase " +
                      (phase.empty() ? std::string("null") : "'" + phase + "'"));
    return Status::Ok();
  }
  if (pairs.empty() || pairs[0].first != kContainer || tokens[0].get<uint64_t>() >> 8 != 1)
    return mismatch("it does not open with the call's arguments");
  size_t leaf = 0;
  for (const auto& [kind, payload] : pairs) {
    if (kind == kLlmPhase) return mismatch("an LLM phase inside a call's key");
    if (kind != kTensor && kind != kValue && kind != kOpaque) continue;
    if (leaf >= leaf_ranks.size())
      return mismatch("more leaves than the input spec's " + std::to_string(leaf_ranks.size()));
    const int64_t rank = leaf_ranks[leaf];
    if (kind == kTensor ? rank != static_cast<int64_t>(payload) : rank != -1) {
      return mismatch(
          "leaf " + std::to_string(leaf) + " is " +
          (kind == kTensor ? "a tensor of rank " + std::to_string(payload) : std::string("a constant")) +
          " in the key but " +
          (rank < 0 ? std::string("a constant") : "a tensor of rank " + std::to_string(rank)) +
          " in the spec");
    }
    ++leaf;
  }
  if (leaf != leaf_ranks.size())
    return mismatch(std::to_string(leaf) + " leaves, the input spec " + std::to_string(leaf_ranks.size()));
  return Status::Ok();
}

}  // namespace aitune::schema
