// The CUDA-graph runner's cache policy (docs/reference/dispatch.md#cuda-graph-runner), apart from capture
// and replay so it is tested without a GPU: the capture key of a call, the LRU of captured keys and
// the bounded list of keys whose capture failed.
//
// Not thread-safe: CudaGraphRunner guards its cache with its own mutex.
#pragma once

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aitune {

// One input signature: a flat token list (per input: dtype, device type and index, contiguity,
// rank, sizes) and its hash, compared hash-first.
struct CaptureKey {
  std::vector<int64_t> tokens;
  uint64_t hash = 0;
  int device_index = -1;

  // Appends one input's tokens; finish() hashes them once all inputs are in.
  void add(c10::ScalarType dtype, int device, bool contiguous, c10::IntArrayRef sizes);
  void finish();
  bool operator==(const CaptureKey& other) const { return hash == other.hash && tokens == other.tokens; }
};

// nullopt unless every input is a defined CUDA tensor on one device (and there is at least one).
std::optional<CaptureKey> make_capture_key(const std::vector<at::Tensor>& inputs);

// "(float32[8, 3] cuda:0, int64[8] cuda:0 non-contiguous)", for the capture-failure warning.
std::string describe_capture_key(const CaptureKey& key);

// Keys that failed to capture are remembered so they are not captured again; bounded so a stream
// of distinct failing shapes cannot grow memory without limit.
inline constexpr size_t kMaxUncapturableKeys = 64;

// At most `capacity` captured entries, least recently used evicted first, plus the uncapturable
// keys. `Entry` is the runner's captured graph (CUDA types stay in the runner's .cc); destroying
// one may wait for its last device work.
template <class Entry>
class CaptureCache {
 public:
  explicit CaptureCache(size_t capacity) : capacity_(capacity) {}

  // The entry captured for `key`, now the most recently used; null when there is none.
  Entry* find(const CaptureKey& key) {
    for (Slot& slot : slots_) {
      if (slot.key == key) {
        slot.last_used = ++tick_;
        return slot.entry.get();
      }
    }
    return nullptr;
  }

  bool is_uncapturable(const CaptureKey& key) const {
    return std::find(uncapturable_.begin(), uncapturable_.end(), key) != uncapturable_.end();
  }
  // Remembers `key` as uncapturable; beyond kMaxUncapturableKeys the oldest is forgotten.
  void mark_uncapturable(const CaptureKey& key) {
    if (uncapturable_.size() >= kMaxUncapturableKeys) uncapturable_.erase(uncapturable_.begin());
    uncapturable_.push_back(key);
  }

  // Before a capture: when the cache is full, evicts the least recently used entry, so the new
  // capture never needs memory for capacity + 1 graphs. True when one was evicted.
  bool make_room() {
    if (slots_.empty() || slots_.size() < capacity_) return false;
    auto oldest = std::min_element(slots_.begin(), slots_.end(),
                                   [](const Slot& a, const Slot& b) { return a.last_used < b.last_used; });
    slots_.erase(oldest);
    return true;
  }

  // Adds a captured entry as the most recently used (call make_room() first).
  Entry& insert(const CaptureKey& key, std::unique_ptr<Entry> entry) {
    slots_.push_back(Slot{key, ++tick_, std::move(entry)});
    return *slots_.back().entry;
  }

  size_t size() const { return slots_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  struct Slot {
    CaptureKey key;
    uint64_t last_used = 0;
    std::unique_ptr<Entry> entry;
  };

  const size_t capacity_;
  std::vector<Slot> slots_;               // at most capacity_; linear scan (the cache is small)
  std::vector<CaptureKey> uncapturable_;  // oldest first
  uint64_t tick_ = 0;                     // recency clock
};

}  // namespace aitune
