// CudaGraphRunner (docs/reference/dispatch.md): wraps any Runner and replays its work as CUDA graphs, one
// per input signature, so every backend gets CUDA graphs from one implementation.
//
// Per call: the key is the shapes, dtypes, device and contiguity of every input. A cached key
// copies the inputs into its static buffers (skipped for an input that is the buffer itself),
// replays on the caller's current stream and clones the static outputs (unless
// clone_outputs=false: then outputs are the static buffers, valid until the next call of that
// key from any thread). Dense inputs and cloned dense outputs are copied by memcpy nodes inside
// the graph, re-pointed at each call's tensors, so a call is one launch (graph_copy_node.h). A new key runs
// one ordinary warmup, captures the inner runner on a side stream into a private memory pool, evicts the
// least recently used key beyond cache_size, and replays. A key whose capture fails is remembered as
// non-capturable and runs through the inner runner from then on. Calls whose inputs are not all on one CUDA
// device, and every call when the runner is disabled, go straight to the inner runner. The key and the
// cache are capture_cache.h; capture is cuda_graph_capture.cc; the per-call path and replay are
// cuda_graph_runner.cc.
//
// Thread-safe: one mutex serialises the cache, copy-in, replay, cloning and every call of the
// (not thread-safe) inner runner. Calls from different streams are also ordered on the device:
// each captured key remembers the stream of its last call; a call on another stream first makes
// its stream wait for that stream's work so far (an event recorded there), which covers the last
// read of the static buffers. Calls on one stream need no event. Callers holding the Python GIL
// must release it before calling run (PyCallableRunner takes it back inside).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runners/capture_cache.h"
#include "runners/cuda_graph_stats.h"
#include "runners/runner.h"

namespace aitune {

struct CudaGraphOptions {
  size_t cache_size = 8;      // captured keys kept; 0 turns capturing off
  bool clone_outputs = true;  // false: outputs alias the graph's static buffers
  // false: every call goes to the inner runner. The AITUNE_DISABLE_CUDA_GRAPHS kill switch wins
  // over true (it turns CUDA graphs off everywhere, docs/reference/dispatch.md#cuda-graph-runner); it is read
  // at construction.
  bool enabled = true;
};

class CudaGraphRunner final : public Runner {
 public:
  using Stats = CudaGraphStats;

  CudaGraphRunner(std::shared_ptr<Runner> inner, CudaGraphOptions options);
  ~CudaGraphRunner() override;
  CudaGraphRunner(const CudaGraphRunner&) = delete;
  CudaGraphRunner& operator=(const CudaGraphRunner&) = delete;

  StatusOr<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) override;
  std::string describe() const override;

  Stats stats() const;
  // The last capture failure, as a one-line warning for the caller to log; empty if none.
  std::string last_warning() const;
  size_t num_cached_graphs() const;
  const CudaGraphOptions& options() const { return options_; }

  // True when AITUNE_DISABLE_CUDA_GRAPHS is 1, true, True, yes, Yes or YES.
  static bool cuda_graphs_disabled_by_env();
  // True when AITUNE_CUDA_GRAPH_COPY_NODES is 0, false, False, no, No or NO: copies into and out
  // of a graph are then launched apart from it (the behaviour before in-graph copies).
  static bool in_graph_copies_disabled_by_env();

 private:
  struct Entry;  // a captured graph with its buffers; CUDA types stay out of this header
  using Key = CaptureKey;

  StatusOr<std::vector<at::Tensor>> run_inner(const std::vector<at::Tensor>& inputs);
  StatusOr<std::vector<at::Tensor>> run_graph(const Key& key, const std::vector<at::Tensor>& inputs);
  StatusOr<std::vector<at::Tensor>> replay(Entry& entry, const std::vector<at::Tensor>& inputs);
  // Captures `key`; on a capture failure returns a null entry and fills `failure`. A Status is
  // returned only for a failure of the warmup run itself (the inner runner's own error).
  StatusOr<std::unique_ptr<Entry>> capture(const Key& key, const std::vector<at::Tensor>& inputs,
                                           std::string& failure);
  void mark_uncapturable(const Key& key, const std::string& why);

  // Immutable after construction.
  const std::shared_ptr<Runner> inner_;
  const CudaGraphOptions options_;
  const bool graphs_active_;    // enabled, not killed by the environment, cache_size > 0, built with CUDA
  const bool in_graph_copies_;  // dense copies in and out ride in the graph (graph_copy_node.h)

  // Everything below is guarded by mutex_.
  mutable std::mutex mutex_;
  CaptureCache<Entry> cache_;  // captured keys (LRU, at most cache_size) and uncapturable ones
  Stats stats_;
  std::string last_warning_;
};

}  // namespace aitune
