// GraphTable: graph key -> graph indices. Immutable once the tuned module is activated, so
// concurrent find() calls need no lock (docs/reference/dispatch.md#threads-and-streams).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "spec/graph_key.h"

namespace aitune {

class GraphTable {
 public:
  // Registers a graph under `key` and returns its index (0, 1, ... in insertion order). Several
  // graphs may share a key when only their non-tensor values differ in ways the key cannot
  // tell apart (unhashable values); find() returns all of them and the caller compares values.
  uint32_t add(const GraphKey& key);

  // Indices of the graphs whose key equals `key` exactly, in insertion order; empty if none.
  std::span<const uint32_t> find(const GraphKey& key) const;

  size_t size() const { return keys_.size(); }
  const GraphKey& key(uint32_t index) const { return keys_.at(index); }

 private:
  struct Bucket {
    GraphKey key;
    std::vector<uint32_t> indices;
  };
  std::unordered_map<uint64_t, std::vector<Bucket>> buckets_by_hash_;
  std::vector<GraphKey> keys_;
};

}  // namespace aitune
