// GraphKey: the identity of a call's structure (docs/reference/recording.md#graph-identity) as a stream of
// 64-bit tokens plus a running hash. Two calls belong to the same graph iff their token streams are equal;
// the hash only speeds up the lookup. Tokens are stable across processes (no pointer or
// randomized-hash input), so a key can be saved. Cheap to build: reuse one key per thread and
// clear() it, so the hot path does not allocate once the vector has grown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace aitune {

// 64-bit FNV-1a of the bytes; stable across runs and platforms.
uint64_t stable_hash(std::string_view bytes);

enum class ContainerKind : uint8_t { kArguments = 1, kSequence, kMapping, kObject };

class GraphKey {
 public:
  void clear();
  void reserve(size_t n) { tokens_.reserve(n); }

  // Rebuilds a saved key (checkpoint manifest) from its tokens; the hash is recomputed.
  static GraphKey from_tokens(const std::vector<uint64_t>& tokens);

  // A container opens with its kind and number of children; each child is preceded by its
  // key (mapping key, attribute or parameter name) or index.
  void add_container(ContainerKind kind, size_t num_children);
  void add_key(std::string_view name);
  void add_index(int64_t index);
  // Leaves: a tensor of the given rank; a non-tensor value summarised by `value_hash` (strict
  // mode; the caller confirms equality of the values themselves); a non-tensor leaf whose value
  // does not take part in identity (strict mode off); an LLM phase
  // (docs/reference/recording.md#graph-identity).
  void add_tensor(int64_t rank);
  void add_value(uint64_t value_hash);
  void add_opaque_value();
  void add_llm_phase(bool prefill);

  uint64_t hash() const { return hash_; }
  size_t size() const { return tokens_.size(); }
  const std::vector<uint64_t>& tokens() const { return tokens_; }

  bool operator==(const GraphKey& other) const { return hash_ == other.hash_ && tokens_ == other.tokens_; }
  bool operator!=(const GraphKey& other) const { return !(*this == other); }

 private:
  void push(uint64_t token);

  std::vector<uint64_t> tokens_;
  uint64_t hash_ = 0;
};

}  // namespace aitune
