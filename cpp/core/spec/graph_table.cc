#include "spec/graph_table.h"

namespace aitune {

uint32_t GraphTable::add(const GraphKey& key) {
  const auto index = static_cast<uint32_t>(keys_.size());
  keys_.push_back(key);
  // Equal hashes with different tokens (a collision) get separate buckets: find() must only
  // return graphs whose key is exactly equal.
  std::vector<Bucket>& buckets = buckets_by_hash_[key.hash()];
  for (Bucket& bucket : buckets) {
    if (bucket.key == key) {
      bucket.indices.push_back(index);
      return index;
    }
  }
  buckets.push_back(Bucket{key, {index}});
  return index;
}

std::span<const uint32_t> GraphTable::find(const GraphKey& key) const {
  const auto it = buckets_by_hash_.find(key.hash());
  if (it == buckets_by_hash_.end()) return {};
  for (const Bucket& bucket : it->second) {
    if (bucket.key == key) return bucket.indices;
  }
  return {};
}

}  // namespace aitune
