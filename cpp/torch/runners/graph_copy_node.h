// In-graph copies for CudaGraphRunner (docs/reference/dispatch.md#cuda-graph-runner). A replay needs the
// caller's inputs in the graph's static buffers and, by default, fresh copies of its static outputs. Launched
// as copies of their own, each one is a device submission before or after the graph: on the H200
// (torch 2.11) the copy-in alone added about 5 us to a single call's latency (bare replay 13.8 us,
// copy + replay 21.2 us). Captured as memcpy nodes of the graph and re-pointed per call with
// cudaGraphExecMemcpyNodeSetParams1D, the copies ride in the graph's one launch. Re-pointing only
// changes later launches (CUDA documents that enqueued or running launches keep their
// parameters), so it is safe while earlier replays are still queued on the device.
//
// CUDA only, no torch: compiled where the toolkit headers exist (see the CMake guard).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace aitune {

// One memcpy node between a buffer the graph owns (the fixed side) and a buffer that changes
// from call to call (the moving side): the caller's input for a copy into the graph, a fresh
// output tensor for a copy out of it.
class GraphCopyNode {
 public:
  enum class Direction { kIntoGraph, kOutOfGraph };

  GraphCopyNode() = default;
  // The memcpy node of `graph` that copies from `src` to `dst` (recorded by a cudaMemcpyAsync
  // during capture); unbound (bound() is false) when the graph has none, so the caller falls
  // back to a copy of its own.
  static GraphCopyNode find(cudaGraph_t graph, Direction direction, void* dst, const void* src, size_t bytes);

  bool bound() const { return node_ != nullptr; }
  // Makes the launches that follow copy from (into the graph) or to (out of it) `ptr`. Skips the
  // driver call when the node already points there, which the caching allocator makes common.
  cudaError_t retarget(cudaGraphExec_t exec, void* ptr);

 private:
  cudaGraphNode_t node_ = nullptr;
  Direction direction_ = Direction::kIntoGraph;
  void* fixed_ = nullptr;
  void* moving_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace aitune
