// Internal to the CUDA-graph runner (cuda_graph_runner.h): what its two halves share. Capture
// (cuda_graph_capture.cc) builds an Entry; the runner (cuda_graph_runner.cc) looks it up in the
// capture cache and replays it. Not part of the public API.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runners/cuda_graph_runner.h"

// CUDA parts compile when torch ships them and the toolkit headers are on the path (a CUDA
// build of torch). Without them the runner forwards every call to the inner runner.
#if !defined(AITUNE_NO_CUDA) && __has_include(<ATen/cuda/CUDAGraph.h>) && __has_include(<cuda_runtime_api.h>)
#define AITUNE_GRAPHS_HAVE_CUDA 1
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "runners/graph_copy_node.h"
#else
#define AITUNE_GRAPHS_HAVE_CUDA 0
#endif

namespace aitune {
namespace cuda_graph {

// A torch exception's message without its C++ backtrace.
inline std::string error_text(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

#if AITUNE_GRAPHS_HAVE_CUDA
// at::cuda::CUDAGraph with access to what a failed capture leaves behind. When capture_end
// throws before finishing (an invalidated capture makes cudaStreamEndCapture fail first thing),
// the graph's reset() does not release the memory pool (see release_failed_capture), and the
// generators registered at capture_begin stay in capturing mode, which makes every later CUDA
// random op in the process fail ("Offset increment outside graph capture").
struct Graph : at::cuda::CUDAGraph {
  // keep_graph keeps the captured cudaGraph_t after instantiation: its memcpy nodes are the
  // handles GraphCopyNode re-points per call.
  explicit Graph(bool keep_graph) : at::cuda::CUDAGraph(keep_graph) {}
  bool capture_ended() const { return capture_ended_; }
  // What CUDAGeneratorState::capture_epilogue does (that symbol is not exported): leave
  // capture mode. The increment it would return belongs to a graph that will never replay.
  void end_generator_capture() {
    for (auto& [state, increment] : captured_generator_states_) state->capturing_ = false;
  }
};
#endif

}  // namespace cuda_graph

#if AITUNE_GRAPHS_HAVE_CUDA

struct CudaGraphRunner::Entry {
  // Members are destroyed in reverse order: the static outputs return their blocks to the
  // private pool before the graph (which releases the pool) goes; the static inputs, from the
  // ordinary allocator, go last. The destructor first waits for the last call's device work.
  Key key;
  std::vector<at::Tensor> static_inputs;  // written by copy-in, read by the graph
  // Per input the graph copies in itself (dense inputs, in-graph copies on): the copy's node and
  // the buffer it reads when the caller's tensor cannot be its source. Undefined/unbound otherwise.
  std::vector<at::Tensor> input_staging;
  std::vector<GraphCopyNode> input_copies;
  // The stream of the last call that used the buffers, and the event that orders a call on
  // another stream after it (recorded only when the stream changes: see replay()).
  std::optional<c10::cuda::CUDAStream> last_stream;
  c10::cuda::CUDAEvent buffers_free;
  std::unique_ptr<cuda_graph::Graph> graph;
  cudaGraphExec_t exec = nullptr;          // the graph's executable, where the copy nodes are re-pointed
  std::vector<at::Tensor> static_outputs;  // in the graph's private pool, overwritten by each replay
  // Per output the graph copies out itself (cloning on, dense outputs): the node and the pool
  // buffer it writes when no fresh tensor is its destination. Undefined/unbound otherwise.
  std::vector<at::Tensor> output_staging;
  std::vector<GraphCopyNode> output_copies;

  Entry() = default;
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  ~Entry() {
    try {
      if (last_stream) last_stream->synchronize();
    } catch (const std::exception&) {  // destructors never throw; a sticky CUDA error surfaces elsewhere
    }
  }
};

#else

struct CudaGraphRunner::Entry {
  Key key;
};

#endif

}  // namespace aitune
