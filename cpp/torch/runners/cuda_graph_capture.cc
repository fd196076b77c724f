// CudaGraphRunner::capture (cuda_graph_runner.h): warm up, capture the inner runner on a side stream
// into a private pool, bind the in-graph copies, and undo what a failed capture leaves behind.
#include "runners/cuda_graph_entry.h"

namespace aitune {

#if AITUNE_GRAPHS_HAVE_CUDA

using cuda_graph::error_text;
using cuda_graph::Graph;

namespace {

// Drops torch warnings while alive (the "CUDA Graph is empty" note of a capture whose inner
// run failed before launching anything: the failure is reported once, through last_warning).
class SilentWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

// Undoes what CUDAGraph::capture_begin set up when capture_end threw before taking it down
// (an invalidated capture makes cudaStreamEndCapture fail first thing): the stream's capture,
// the allocators' routing into the pool, and the pool's use count. Every step may already have
// happened or never have started, so each one is best effort.
void release_failed_capture(const c10::cuda::CUDAStream& stream, c10::DeviceIndex device,
                            c10::MempoolId_t pool) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream.stream(), &status) == cudaSuccess &&
      status != cudaStreamCaptureStatusNone) {
    cudaGraph_t raw = nullptr;
    if (cudaStreamEndCapture(stream.stream(), &raw) == cudaSuccess && raw != nullptr) cudaGraphDestroy(raw);
  }
  try {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device, pool);
  } catch (const std::exception&) {
  }
  try {
    at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(pool);
  } catch (const std::exception&) {
  }
  try {
    c10::cuda::CUDACachingAllocator::releasePool(device, pool);
  } catch (const std::exception&) {
  }
  try {
    at::getHostAllocator(at::kCUDA)->release_pool(pool);
  } catch (const std::exception&) {
  }
}

// Makes `waiter` wait for the work enqueued so far on `producer` (device-side, no host sync).
void stream_wait(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& producer) {
  c10::cuda::CUDAEvent event;
  event.record(producer);
  event.block(waiter);
}

// During capture, after the inner run: a copy of each dense output into a pool buffer, recorded
// as the node a replay re-points at its fresh output. Returns the buffers (undefined where none).
std::vector<at::Tensor> record_copy_out_nodes(const std::vector<at::Tensor>& outputs, c10::DeviceIndex device,
                                              cudaStream_t stream) {
  std::vector<at::Tensor> staging(outputs.size());
  for (size_t j = 0; j < outputs.size(); ++j) {
    const at::Tensor& out = outputs[j];
    if (!out.defined() || !out.is_cuda() || out.device().index() != device || !out.is_contiguous() ||
        out.nbytes() == 0) {
      continue;
    }
    staging[j] = at::empty_like(out);  // allocated inside the capture: from the graph's pool
    C10_CUDA_CHECK(cudaMemcpyAsync(staging[j].data_ptr(), out.data_ptr(), out.nbytes(),
                                   cudaMemcpyDeviceToDevice, stream));
  }
  return staging;
}

// The graph's own input tensors (dense copies of `inputs`, channels_last kept) and, with in-graph
// copies on, the staging buffer each dense one is copied in from (undefined where none).
void make_static_inputs(const std::vector<at::Tensor>& inputs, bool in_graph_copies,
                        std::vector<at::Tensor>& static_inputs, std::vector<at::Tensor>& staging) {
  static_inputs.reserve(inputs.size());
  for (const at::Tensor& input : inputs) {
    static_inputs.push_back(at::empty_like(input));  // keeps a dense layout (channels_last stays)
    static_inputs.back().copy_(input, true);
  }
  staging.resize(inputs.size());
  for (size_t i = 0; in_graph_copies && i < inputs.size(); ++i) {
    if (!static_inputs[i].is_contiguous() || static_inputs[i].nbytes() == 0) continue;
    staging[i] = at::empty_like(static_inputs[i]);
    staging[i].copy_(inputs[i], true);
  }
}

// Why the captured outputs cannot be replayed (one is not a tensor on `device`), or "".
std::string non_device_output(const std::vector<at::Tensor>& outs, c10::DeviceIndex device) {
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined() || !outs[i].is_cuda() || outs[i].device().index() != device) {
      return "output " + std::to_string(i) + " is not a tensor on cuda:" + std::to_string(device) +
             " (a graph can only replay device work)";
    }
  }
  return "";
}

// Finds the memcpy node of every staged copy in the captured graph (graph_copy_node.h): into the
// graph the staging buffer is the source and the graph's tensor the destination, out of it the
// other way round. `copies` has one slot per staging buffer; returns how many nodes were bound.
uint64_t bind_copy_nodes(cudaGraph_t raw, GraphCopyNode::Direction direction,
                         const std::vector<at::Tensor>& staging, const std::vector<at::Tensor>& in_graph,
                         std::vector<GraphCopyNode>& copies) {
  const bool into = direction == GraphCopyNode::Direction::kIntoGraph;
  uint64_t bound = 0;
  for (size_t i = 0; i < staging.size(); ++i) {
    if (!staging[i].defined()) continue;
    void* dst = into ? in_graph[i].data_ptr() : staging[i].data_ptr();
    const void* src = into ? staging[i].data_ptr() : in_graph[i].data_ptr();
    copies[i] = GraphCopyNode::find(raw, direction, dst, src, staging[i].nbytes());
    bound += copies[i].bound();
  }
  return bound;
}

}  // namespace

StatusOr<std::unique_ptr<CudaGraphRunner::Entry>> CudaGraphRunner::capture(
    const Key& key, const std::vector<at::Tensor>& inputs, std::string& failure) {
  const auto device = static_cast<c10::DeviceIndex>(key.device_index);
  c10::cuda::CUDAGuard device_guard(device);
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device);

  auto entry = std::make_unique<Entry>();
  entry->key = key;
  make_static_inputs(inputs, in_graph_copies_, entry->static_inputs, entry->input_staging);
  entry->input_copies.resize(inputs.size());

  // Warmup and capture share one side stream, so per-stream lazy state (cuBLAS workspaces, for
  // one) is created by the warmup, outside the capture and its private pool.
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device);
  stream_wait(side, current);
  // Joins the side stream back into the caller's stream on every exit.
  struct Rejoin {
    const c10::cuda::CUDAStream& current;
    const c10::cuda::CUDAStream& side;
    ~Rejoin() {
      try {
        stream_wait(current, side);
      } catch (const std::exception&) {
      }
    }
  } rejoin{current, side};
  c10::cuda::CUDAStreamGuard stream_guard(side);

  {
    auto warmup = inner_->run(entry->static_inputs);
    if (!warmup.ok()) return warmup.status();
  }  // warmup outputs are freed on the side stream, where they were allocated
  side.synchronize();

  auto graph = std::make_unique<Graph>(in_graph_copies_);
  const c10::MempoolId_t pool = at::cuda::graph_pool_handle();  // private to this key's graph
  StatusOr<std::vector<at::Tensor>> outputs = internal_error("capture did not run");
  bool begun = false;
  try {
    // Thread-local mode: other threads may keep using CUDA (and this runner's other graphs'
    // replays never overlap a capture: the mutex is held).
    graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
    begun = true;
    for (size_t i = 0; i < inputs.size(); ++i) {  // the copy-in nodes (see graph_copy_node.h)
      const at::Tensor& staging = entry->input_staging[i];
      if (!staging.defined()) continue;
      C10_CUDA_CHECK(cudaMemcpyAsync(entry->static_inputs[i].data_ptr(), staging.data_ptr(), staging.nbytes(),
                                     cudaMemcpyDeviceToDevice, side.stream()));
    }
    outputs = inner_->run(entry->static_inputs);
    if (!outputs.ok()) {
      failure = outputs.status().message();
    } else if (in_graph_copies_ && options_.clone_outputs) {
      entry->output_staging = record_copy_out_nodes(outputs.value(), device, side.stream());
    }
  } catch (const std::exception& e) {
    failure = error_text(e);
  }
  if (begun) {
    SilentWarnings silent;
    std::optional<c10::WarningUtils::WarningHandlerGuard> quiet;
    if (!failure.empty()) quiet.emplace(&silent);
    try {
      graph->capture_end();  // always end a begun capture, whatever happened inside it
    } catch (const std::exception& e) {
      if (failure.empty()) failure = error_text(e);
    }
  }
  if (failure.empty()) failure = non_device_output(outputs.value(), device);
  if (failure.empty() && in_graph_copies_) {
    try {
      const cudaGraph_t raw = graph->raw_cuda_graph();
      const auto& outs = outputs.value();
      entry->output_staging.resize(outs.size());
      entry->output_copies.resize(outs.size());
      const uint64_t bound = bind_copy_nodes(raw, GraphCopyNode::Direction::kIntoGraph, entry->input_staging,
                                             entry->static_inputs, entry->input_copies) +
                             bind_copy_nodes(raw, GraphCopyNode::Direction::kOutOfGraph,
                                             entry->output_staging, outs, entry->output_copies);
      graph->instantiate();
      entry->exec = graph->raw_cuda_graph_exec();
      stats_.in_graph_copies += bound;
    } catch (const std::exception& e) {
      failure = error_text(e);
    }
  }
  if (!failure.empty()) {
    outputs = internal_error("discarded");  // drop pool tensors before the pool is released
    entry->output_staging.clear();
    if (!graph->capture_ended()) {
      graph->end_generator_capture();
      release_failed_capture(side, device, pool);
    }
    graph.reset();
    (void)cudaGetLastError();  // a failed capture leaves a non-sticky error behind
    return std::unique_ptr<Entry>();
  }
  entry->graph = std::move(graph);
  entry->static_outputs = std::move(outputs).value();
  entry->output_staging.resize(entry->static_outputs.size());  // one slot per output, also without
  entry->output_copies.resize(entry->static_outputs.size());   // in-graph copies (replay indexes them)
  return entry;
}

#else  // !AITUNE_GRAPHS_HAVE_CUDA: graphs_active_ is false, so this is never reached.

StatusOr<std::unique_ptr<CudaGraphRunner::Entry>> CudaGraphRunner::capture(const Key&,
                                                                           const std::vector<at::Tensor>&,
                                                                           std::string& failure) {
  failure = "this build of aitune has no CUDA support";
  return std::unique_ptr<Entry>();
}

#endif

}  // namespace aitune
