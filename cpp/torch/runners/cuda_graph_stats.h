// Counters of a CudaGraphRunner since its construction. Its own header so the runtime's public
// API (runtime.h, CudaGraphCounters) reports them without including the runner.
#pragma once

#include <cstdint>

namespace aitune {

// Every call counts once: as a hit (replayed a cached graph), a miss (new key, capture
// attempted), or a direct call (ran through the inner runner: disabled, non-CUDA inputs, or a
// non-capturable key).
struct CudaGraphStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t captures = 0;  // successful captures (a miss whose capture failed is not one)
  uint64_t evictions = 0;
  uint64_t capture_failures = 0;  // keys marked non-capturable
  uint64_t direct_calls = 0;
  uint64_t in_graph_copies =
      0;  // input and output copies captured as nodes of the graphs (not launched apart)
};

}  // namespace aitune
