// CudaGraphRunner (cuda_graph_runner.h): the per-call path (key, cache lookup, replay, direct calls)
// and the counters. Capture is in cuda_graph_capture.cc, the cache policy in capture_cache.h.
#include "runners/cuda_graph_runner.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "runners/cuda_graph_entry.h"

namespace aitune {
namespace {

using cuda_graph::error_text;

// True when the environment variable `name` is set to one of `values`.
bool env_is_one_of(const char* name, std::initializer_list<std::string_view> values) {
  const char* value = std::getenv(name);
  return value != nullptr && std::find(values.begin(), values.end(), std::string_view(value)) != values.end();
}

}  // namespace

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
                  describe_capture_key(key) + ": " + why.substr(0, why.find('\n')) +
                  "; these inputs run without a CUDA graph";
}

#if AITUNE_GRAPHS_HAVE_CUDA

namespace {

bool is_same_buffer(const at::Tensor& a, const at::Tensor& b) {
  return a.is_same(b) || (a.data_ptr() == b.data_ptr() && a.strides() == b.strides());
}

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

// A fresh copy of a static output; strided outputs keep their layout through clone().
at::Tensor fresh_copy(const at::Tensor& out, cudaStream_t stream) {
  if (!out.is_contiguous()) return out.clone();
  at::Tensor copy = at::empty(out.sizes(), out.options());
  if (!dense_device_copy(copy, out, stream)) copy.copy_(out);
  return copy;
}

}  // namespace

StatusOr<std::vector<at::Tensor>> CudaGraphRunner::run_graph(const Key& key,
                                                             const std::vector<at::Tensor>& inputs) {
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

StatusOr<std::vector<at::Tensor>> CudaGraphRunner::replay(Entry& entry,
                                                          const std::vector<at::Tensor>& inputs) {
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

#else  // !AITUNE_GRAPHS_HAVE_CUDA: graphs_active_ is false, so these are never reached.

StatusOr<std::vector<at::Tensor>> CudaGraphRunner::run_graph(const Key&,
                                                             const std::vector<at::Tensor>& inputs) {
  return run_inner(inputs);
}

StatusOr<std::vector<at::Tensor>> CudaGraphRunner::replay(Entry&, const std::vector<at::Tensor>&) {
  return unsupported("CUDA graphs: this build of aitune has no CUDA support");
}

#endif

}  // namespace aitune
