#include "spec/graph_key.h"

namespace aitune {
namespace {

constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

// Every element is exactly two tokens, a tag then a payload, so a stream parses one way only:
// e.g. a key hash can never be mistaken for a tensor rank. Values are part of the saved format.
enum class Tag : uint64_t {
  kContainer = 1,    // kind in the bits above kTagBits, payload: number of children
  kKey = 2,          // payload: stable_hash(name)
  kIndex = 3,        // payload: index
  kTensor = 4,       // payload: rank
  kValue = 5,        // payload: value hash
  kOpaqueValue = 6,  // payload: 0
  kLlmPhase = 7,     // payload: 1 prefill, 0 decode
};
constexpr int kTagBits = 8;

constexpr uint64_t tag_token(Tag tag, uint64_t extra = 0) {
  return static_cast<uint64_t>(tag) | (extra << kTagBits);
}

// splitmix64's finalizer: a bijection with full avalanche, so the chained hash depends on every
// bit of every token and on their order.
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t stable_hash(std::string_view bytes) {
  uint64_t hash = kFnvOffsetBasis;
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= kFnvPrime;
  }
  return hash;
}

void GraphKey::clear() {
  tokens_.clear();  // keeps the capacity: the hot path reuses one key per thread
  hash_ = 0;
}

GraphKey GraphKey::from_tokens(const std::vector<uint64_t>& tokens) {
  GraphKey key;
  key.tokens_.reserve(tokens.size());
  for (uint64_t token : tokens) key.push(token);
  return key;
}

void GraphKey::push(uint64_t token) {
  tokens_.push_back(token);
  // The golden-ratio offset keeps a zero token from leaving a zero hash unchanged (mix64(0) == 0).
  hash_ = mix64((hash_ ^ token) + 0x9e3779b97f4a7c15ULL);
}

void GraphKey::add_container(ContainerKind kind, size_t num_children) {
  push(tag_token(Tag::kContainer, static_cast<uint64_t>(kind)));
  push(static_cast<uint64_t>(num_children));
}

void GraphKey::add_key(std::string_view name) {
  push(tag_token(Tag::kKey));
  push(stable_hash(name));
}

void GraphKey::add_index(int64_t index) {
  push(tag_token(Tag::kIndex));
  push(static_cast<uint64_t>(index));
}

void GraphKey::add_tensor(int64_t rank) {
  push(tag_token(Tag::kTensor));
  push(static_cast<uint64_t>(rank));
}

void GraphKey::add_value(uint64_t value_hash) {
  push(tag_token(Tag::kValue));
  push(value_hash);
}

void GraphKey::add_opaque_value() {
  push(tag_token(Tag::kOpaqueValue));
  push(0);
}

void GraphKey::add_llm_phase(bool prefill) {
  push(tag_token(Tag::kLlmPhase));
  push(prefill ? 1 : 0);
}

}  // namespace aitune
