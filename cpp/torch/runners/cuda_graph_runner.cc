#include "runners/cuda_graph_runner.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "bridge/tensor_bridge.h"

// CUDA parts compile when torch ships them and the toolkit headers are on the path (a CUDA
// build of torch). Without them the runner forwards every call to the inner runner.
#if !defined(AITUNE_NO_CUDA) && __has_include(<ATen/cuda/CUDAGraph.h>) && __has_include(<cuda_runtime_api.h>)
#define AITUNE_GRAPHS_HAVE_CUDA 1
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/core/CachingHostAllocator.h>
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
namespace {

std::string error_text(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

// True when the environment variable `name` is set to one of `values`.
bool env_is_one_of(const char* name, std::initializer_list<std::string_view> values) {
  const char* value = std::getenv(name);
  return value != nullptr && std::find(values.begin(), values.end(), std::string_view(value)) != values.end();
}

}  // namespace

#if AITUNE_GRAPHS_HAVE_CUDA
namespace {

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
void release_failed_capture(const c10::cuda::CUDAStream& stream, c10::DeviceIndex device, c10::MempoolId_t pool) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
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

bool is_same_buffer(const at::Tensor& a, const at::Tensor& b) {
  return a.is_same(b) || (a.data_ptr() == b.data_ptr() && a.strides() == b.strides());
}

}  // namespace

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
  std::unique_ptr<Graph> graph;
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

CudaGraphRunner::CudaGraphRunner(std::shared_ptr<Runner> inner, CudaGraphOptions options)
    : inner_(std::move(inner)),
      options_(options),
      graphs_active_(AITUNE_GRAPHS_HAVE_CUDA && options.enabled && options.cache_size > 0 &&
                     !cuda_graphs_disabled_by_env()),
      in_graph_copies_(!in_graph_copies_disabled_by_env()),
      cache_(options.cache_size) {}

CudaGraphRunner::~CudaGraphRunner() = default;

bool CudaGraphRunner::cuda_graphs_disabled_by_env() {
  return env_is_one_of("AITUNE_DISABLE_CUDA_GRAPHS", {"1", "true", "True", "yes", "Yes", "YES"});
}

bool CudaGraphRunner::in_graph_copies_disabled_by_env() {
  return env_is_one_of("AITUNE_CUDA_GRAPH_COPY_NODES", {"0", "false", "False", "no", "No", "NO"});
}

std::string CudaGraphRunner::describe() const {
  return "CudaGraphRunner(" + (inner_ ? inner_->describe() : std::string("<no inner runner>")) + ")";
}

CudaGraphRunner::Stats CudaGraphRunner::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string CudaGraphRunner::last_warning() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_warning_;
}

size_t CudaGraphRunner::num_cached_graphs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.size();
}

StatusOr<std::vector<at::Tensor>> CudaGraphRunner::run(const std::vector<at::Tensor>& inputs) {
  if (!inner_) return invalid_argument("CudaGraphRunner: no inner runner to run");
  if (!graphs_active_) return run_inner(inputs);
  std::optional<Key> key = make_capture_key(inputs);
  if (!key) return run_inner(inputs);
  return run_graph(*key, inputs);
}

StatusOr<std::vector<at::Tensor>> CudaGraphRunner::run_inner(const std::vector<at::Tensor>& inputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.direct_calls;
  try {
    return inner_->run(inputs);
  } catch (const std::exception& e) {
    return Status(StatusCode::kBackendError, "runner '" + inner_->describe() + "' failed: " + error_text(e));
  }
}

void CudaGraphRunner::mark_uncapturable(const Key& key, const std::string& why) {
  cache_.mark_uncapturable(key);
  ++stats_.capture_failures;
  // Torch's CUDA errors and Python tracebacks span lines; the first one says what failed.
  last_warning_ = "CUDA graph capture failed for runner '" + inner_->describe() + "' with inputs " +
                  describe_capture_key(key) + ": " + why.substr(0, why.find('\n')) + "; these inputs run without a CUDA graph";
}

#if AITUNE_GRAPHS_HAVE_CUDA

namespace {

// One cudaMemcpyAsync for a dense same-dtype, same-shape device-to-device copy. A replay makes
// one copy per input and one per cloned output; ATen's copy_ spends its dispatch and checks on
// them (the runner measured about 6 us over copy + replay on the H200, torch 2.11,
// docs/reference/dispatch.md#per-call-pipeline budget: a few us), which this case does not need. Anything
// else goes through copy_.
bool dense_device_copy(const at::Tensor& dst, const at::Tensor& src, cudaStream_t stream) {
  if (dst.scalar_type() != src.scalar_type() || dst.device() != src.device() || dst.sizes() != src.sizes() ||
      !dst.is_contiguous() || !src.is_contiguous()) {
    return false;
  }
  const size_t bytes = src.nbytes();
  if (bytes > 0) {
    C10_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, cudaMemcpyDeviceToDevice, stream));
  }
  return true;
}

// The graph's first nodes copy each dense input into its static buffer: from the caller's tensor
// itself when the node can be pointed at it, else from the staging buffer, filled here first.
void copy_in_through_graph(GraphCopyNode& node, at::Tensor& staging, const at::Tensor& static_input,
                           cudaGraphExec_t exec, const at::Tensor& input, cudaStream_t stream) {
  if (node.bound() && input.is_contiguous() && !is_same_buffer(input, static_input)) {
    if (node.retarget(exec, input.data_ptr()) == cudaSuccess) return;
    (void)cudaGetLastError();  // e.g. memory the driver will not copy from in a graph: go through staging
  }
  if (!dense_device_copy(staging, input, stream)) staging.copy_(input, true);
  if (node.bound()) C10_CUDA_CHECK(node.retarget(exec, staging.data_ptr()));
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
    C10_CUDA_CHECK(cudaMemcpyAsync(staging[j].data_ptr(), out.data_ptr(), out.nbytes(), cudaMemcpyDeviceToDevice,
                                   stream));
  }
  return staging;
}

// A fresh copy of a static output; strided outputs keep their layout through clone().
at::Tensor fresh_copy(const at::Tensor& out, cudaStream_t stream) {
  if (!out.is_contiguous()) return out.clone();
  at::Tensor copy = at::empty(out.sizes(), out.options());
  if (!dense_device_copy(copy, out, stream)) copy.copy_(out);
  return copy;
}

}  // namespace

StatusOr<std::vector<at::Tensor>> CudaGraphRunner::run_graph(const Key& key, const std::vector<at::Tensor>& inputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    // Graphs are an inference path: nothing captured may record autograd history.
    at::NoGradGuard no_grad;
    if (Entry* entry = cache_.find(key)) {
      ++stats_.hits;
      return replay(*entry, inputs);
    }
    if (cache_.is_uncapturable(key)) {
      ++stats_.direct_calls;
      return inner_->run(inputs);
    }
    ++stats_.misses;
    // Evict first so the new capture does not need memory for cache_size + 1 graphs; the evicted
    // entry's destructor waits for its last device use.
    if (cache_.make_room()) ++stats_.evictions;
    std::string failure;
    AITUNE_ASSIGN_OR_RETURN(std::unique_ptr<Entry> entry, capture(key, inputs, failure));
    if (!entry) {
      mark_uncapturable(key, failure);
      return inner_->run(inputs);
    }
    ++stats_.captures;
    return replay(cache_.insert(key, std::move(entry)), inputs);
  } catch (const std::exception& e) {
    return Status(StatusCode::kCudaError,
                  "CUDA graph run failed for runner '" + inner_->describe() + "': " + error_text(e));
  }
}

StatusOr<std::vector<at::Tensor>> CudaGraphRunner::replay(Entry& entry, const std::vector<at::Tensor>& inputs) {
  const auto device = static_cast<c10::DeviceIndex>(entry.key.device_index);
  c10::cuda::CUDAGuard device_guard(device);
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device);
  // A previous call on another stream may still be reading the buffers on the device. Calls on
  // one stream are ordered by the stream itself, so the event is only recorded (on the previous
  // stream, covering its work so far: a superset of the last read) when the stream changes;
  // recording and waiting on every call cost about 3 us of the per-call budget.
  if (entry.last_stream && *entry.last_stream != stream) {
    entry.buffers_free.record(*entry.last_stream);
    entry.buffers_free.block(stream);
  }
  entry.last_stream = stream;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (entry.input_staging[i].defined()) {
      copy_in_through_graph(entry.input_copies[i], entry.input_staging[i], entry.static_inputs[i], entry.exec,
                            inputs[i], stream.stream());
      continue;
    }
    if (is_same_buffer(inputs[i], entry.static_inputs[i])) continue;
    if (!dense_device_copy(entry.static_inputs[i], inputs[i], stream.stream())) {
      entry.static_inputs[i].copy_(inputs[i], true);
    }
  }
  std::vector<at::Tensor> outputs;
  if (!options_.clone_outputs) {
    entry.graph->replay();  // launches on the current stream
    return entry.static_outputs;
  }
  // Fresh outputs the graph copies into are allocated before the replay that writes them.
  outputs.resize(entry.static_outputs.size());
  for (size_t j = 0; j < outputs.size(); ++j) {
    GraphCopyNode& node = entry.output_copies[j];
    if (!node.bound()) continue;
    const at::Tensor& out = entry.static_outputs[j];
    at::Tensor fresh = at::empty(out.sizes(), out.options());
    if (node.retarget(entry.exec, fresh.data_ptr()) == cudaSuccess) {
      outputs[j] = std::move(fresh);
    } else {  // the node must not keep writing into a tensor handed out earlier
      (void)cudaGetLastError();
      C10_CUDA_CHECK(node.retarget(entry.exec, entry.output_staging[j].data_ptr()));
    }
  }
  entry.graph->replay();
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (!outputs[j].defined()) outputs[j] = fresh_copy(entry.static_outputs[j], stream.stream());
  }
  return outputs;
}

StatusOr<std::unique_ptr<CudaGraphRunner::Entry>> CudaGraphRunner::capture(const Key& key,
                                                                            const std::vector<at::Tensor>& inputs,
                                                                            std::string& failure) {
  const auto device = static_cast<c10::DeviceIndex>(key.device_index);
  c10::cuda::CUDAGuard device_guard(device);
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device);

  auto entry = std::make_unique<Entry>();
  entry->key = key;
  entry->static_inputs.reserve(inputs.size());
  for (const at::Tensor& input : inputs) {
    entry->static_inputs.push_back(at::empty_like(input));  // keeps a dense layout (channels_last stays)
    entry->static_inputs.back().copy_(input, true);
  }
  entry->input_staging.resize(inputs.size());
  entry->input_copies.resize(inputs.size());
  for (size_t i = 0; in_graph_copies_ && i < inputs.size(); ++i) {
    if (!entry->static_inputs[i].is_contiguous() || entry->static_inputs[i].nbytes() == 0) continue;
    entry->input_staging[i] = at::empty_like(entry->static_inputs[i]);
    entry->input_staging[i].copy_(inputs[i], true);
  }

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
  if (failure.empty()) {
    const auto& outs = outputs.value();
    for (size_t i = 0; i < outs.size() && failure.empty(); ++i) {
      if (!outs[i].defined() || !outs[i].is_cuda() || outs[i].device().index() != device) {
        failure = "output " + std::to_string(i) + " is not a tensor on cuda:" + std::to_string(device) +
                  " (a graph can only replay device work)";
      }
    }
  }
  if (failure.empty() && in_graph_copies_) {
    try {
      uint64_t bound = 0;
      const cudaGraph_t raw = graph->raw_cuda_graph();
      for (size_t i = 0; i < inputs.size(); ++i) {
        const at::Tensor& staging = entry->input_staging[i];
        if (!staging.defined()) continue;
        entry->input_copies[i] = GraphCopyNode::find(raw, GraphCopyNode::Direction::kIntoGraph,
                                                     entry->static_inputs[i].data_ptr(), staging.data_ptr(),
                                                     staging.nbytes());
        bound += entry->input_copies[i].bound();
      }
      const auto& outs = outputs.value();
      entry->output_staging.resize(outs.size());
      entry->output_copies.resize(outs.size());
      for (size_t j = 0; j < outs.size(); ++j) {
        const at::Tensor& staging = entry->output_staging[j];
        if (!staging.defined()) continue;
        entry->output_copies[j] = GraphCopyNode::find(raw, GraphCopyNode::Direction::kOutOfGraph,
                                                      staging.data_ptr(), outs[j].data_ptr(), staging.nbytes());
        bound += entry->output_copies[j].bound();
      }
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

#else  // !AITUNE_GRAPHS_HAVE_CUDA: graphs_active_ is false, so these are never reached.

StatusOr<std::vector<at::Tensor>> CudaGraphRunner::run_graph(const Key&, const std::vector<at::Tensor>& inputs) {
  return run_inner(inputs);
}

StatusOr<std::vector<at::Tensor>> CudaGraphRunner::replay(Entry&, const std::vector<at::Tensor>&) {
  return unsupported("CUDA graphs: this build of aitune has no CUDA support");
}

StatusOr<std::unique_ptr<CudaGraphRunner::Entry>> CudaGraphRunner::capture(const Key&, const std::vector<at::Tensor>&,
                                                                            std::string& failure) {
  failure = "this build of aitune has no CUDA support";
  return std::unique_ptr<Entry>();
}

#endif

}  // namespace aitune
