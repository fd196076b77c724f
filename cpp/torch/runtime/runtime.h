// The pure-C++ runtime (docs/reference/native.md#runtime-api): loads an aitune checkpoint (`.ait`) and serves
// its tuned modules without Python. Only natively runnable graphs (AOTInductor packages, for now) run here;
// graphs whose backend needs Python report kBackendUnavailable.
//
// Never throws: every fallible call returns Status / StatusOr; torch exceptions are caught.
// Exposes no third-party types but torch's: the manifest is the typed one of checkpoint/manifest.h.
// Thread-safety: load() is not to be raced on one path with itself in-process (the extraction
// cache serialises processes); ModuleHandle::run may be called from several threads at once.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "checkpoint/fingerprint.h"
#include "checkpoint/manifest.h"
#include "common/status.h"
#include "runners/cuda_graph_stats.h"

namespace aitune {

class ArchiveReader;
class CudaGraphRunner;
class Runner;

using Value = std::variant<std::monostate, at::Tensor, bool, int64_t, double, std::string>;
// Keyed by a leaf's semantic form ("x", "('options', 'mask')"), its access form
// (`options["mask"]`) or its tensor name (`input_options_mask`).
using Inputs = std::map<std::string, Value>;

struct Outputs {
  std::vector<std::pair<std::string, at::Tensor>> items;  // (access path, tensor), native output order
  const at::Tensor* find(std::string_view access_path) const;
};

// CUDA graphs for the natively run graphs (docs/reference/dispatch.md#cuda-graph-runner,
// docs/reference/native.md#runtime-api): one CudaGraphRunner per graph.
struct CudaGraphLoadOptions {
  std::optional<bool> enabled;  // nullopt: as saved (the backend config's use_cuda_graphs)
  size_t cache_size = 8;        // captured input signatures kept per graph (LRU)
  bool clone_outputs = true;    // false: outputs alias the graph's buffers until the next call
};

// Counters of a graph's CUDA-graph runner.
using CudaGraphCounters = CudaGraphStats;

struct LoadOptions {
  int device_index = 0;              // CUDA device for CUDA artifacts; -1: CPU
  std::string cache_dir;             // empty: common/cache_dir.h's rule (as Python's)
  bool verify_full = false;          // re-hash cached artifacts on an extraction-cache hit
  bool allow_incompatible = false;   // load despite fingerprint mismatches (graphs keep the mismatch text)
  bool load_runners = true;          // false: verify and describe only (aitune inspect)
  CudaGraphLoadOptions cuda_graphs;  // applies to CUDA graphs (device_index >= 0) only
};

// One leaf of an input or output spec (docs/reference/recording.md#binding-flattening-and-names),
// as the manifest holds it; a constant's recorded node is `value_json` (and `scalar`).
using LeafInfo = ManifestLeaf;
// A tensor input's saved range; `bounded` false: the checkpoint saved none (any shape goes).
using ProfileRange = ManifestProfile;

struct GraphInfo {
  std::string name;
  std::string backend_class;        // format 1: the qualified Python class name it stored; format 2: empty
  std::string backend_name;         // stable name: "torch_inductor_aot", "custom:<module>.<qualname>"
  std::string backend_config_json;  // the backend's config object, JSON text
  std::string precision_class;      // "fp32", ...
  bool native = false;
  std::string not_native_reason;  // empty when native
  std::string incompatible;       // fingerprint mismatches (one per line) when loaded with allow_incompatible
  std::string device;             // the backend's saved device: "cpu", "cuda:0"
  std::vector<LeafInfo> inputs;
  std::vector<LeafInfo> outputs;
  std::vector<ProfileRange> profiles;  // per tensor input leaf, in tensor-leaf order; empty: no hard range
  std::vector<int> input_order;        // tensor-leaf index feeding each native input
  std::vector<std::string> output_paths;
  std::vector<std::string> samples;          // entry prefixes
  std::vector<std::string> required_fields;  // the manifest's "requires"
  bool saved_cuda_graphs = false;            // the backend config's use_cuda_graphs
  bool cuda_graphs = false;                  // served through a CUDA-graph runner in this Runtime
};

// A stored sample of a graph: its tensor inputs keyed by tensor name, and the eager reference
// output (access path -> tensor; empty when not stored).
struct StoredSample {
  Inputs inputs;
  std::vector<std::pair<std::string, at::Tensor>> reference;
  int64_t batch_size = 0;
};

// Index in `graph.inputs` of the leaf that an `Inputs` key names (its semantic form, access form
// or tensor name), resolved as ModuleHandle::run resolves keys; nullopt when no leaf matches.
std::optional<size_t> find_input_leaf(const GraphInfo& graph, std::string_view key);

class Runtime;

class ModuleHandle {
 public:
  ~ModuleHandle();
  const std::string& name() const { return name_; }
  const std::vector<GraphInfo>& graphs() const { return graphs_; }

  // Selects the graph whose tensor inputs match `inputs` (names and ranks), checks dtypes and
  // the profile ranges, runs it. kGraphNotFound, kBackendUnavailable, kProfileShape,
  // kBackendError.
  StatusOr<Outputs> run(const Inputs& inputs) const;
  // Same, on a named graph.
  StatusOr<Outputs> run_graph(const std::string& graph, const Inputs& inputs) const;
  // The name of the graph run(inputs) would select (kGraphNotFound, with run's message, when none).
  StatusOr<std::string> select_graph(const Inputs& inputs) const;
  // Stored sample `index` of `graph` (kNotFound when absent).
  StatusOr<StoredSample> sample(const std::string& graph, size_t index) const;
  // The CUDA-graph counters of `graph`; nullopt when it is not served through CUDA graphs.
  std::optional<CudaGraphCounters> cuda_graph_counters(const std::string& graph) const;

 private:
  friend class Runtime;
  ModuleHandle();  // defined where Served is complete
  // How one graph is served: its dispatch record (input rules, runner, input order, output
  // names; cpp/torch/dispatch/graph_dispatch.h) and the runners behind it. Defined in runtime.cc.
  struct Served;

  // Adds graph `g` (not served until serve()); called while loading.
  void add_graph(GraphInfo g);
  // Serves graph `index` with `runner`, through `cuda_graphs` (wrapping it) when not null.
  void serve(size_t index, std::shared_ptr<Runner> runner, int device_index,
             std::shared_ptr<CudaGraphRunner> cuda_graphs);
  StatusOr<Outputs> run_index(size_t graph_index, const std::vector<at::Tensor>& tensors) const;
  // Tensor inputs of graph `g` in tensor-leaf order, or an explanation why they do not fit.
  StatusOr<std::vector<at::Tensor>> bind(size_t g, const Inputs& inputs, bool check_ranks) const;
  Status no_graph_for(const Inputs& inputs) const;

  std::string name_;
  std::vector<GraphInfo> graphs_;  // what the graphs are (public, for inspect and bench)
  std::vector<Served> served_;     // how each is served, indexed like graphs_
  const Runtime* runtime_ = nullptr;
};

class Runtime {
 public:
  static StatusOr<std::unique_ptr<Runtime>> load(const std::string& path, const LoadOptions& options);
  ~Runtime();

  std::vector<std::string> modules() const;
  StatusOr<const ModuleHandle*> module(const std::string& name) const;
  const Manifest& manifest() const { return manifest_; }
  const Fingerprint& fingerprint() const { return manifest_.fingerprint; }
  const std::string& path() const { return path_; }
  std::vector<FileRecord> files() const;
  // Reads and verifies an entry's bytes (SHA-256 against the manifest).
  StatusOr<std::string_view> read_entry(const std::string& entry) const;
  // Verifies the SHA-256 of every listed entry.
  Status verify_all() const;

 private:
  Runtime() = default;
  // Load steps (runtime.cc), in order.
  Status open_archive(const std::string& path);
  Status build_modules(const LoadOptions& options, std::vector<FileRecord>* to_extract);
  Status load_runners(const LoadOptions& options, const std::vector<FileRecord>& to_extract);

  std::string path_;
  Manifest manifest_;
  std::unique_ptr<ArchiveReader> reader_;
  std::vector<std::unique_ptr<ModuleHandle>> modules_;
};

// What this process's environment probe knows of a fingerprint, for device_index's GPU when any
// (docs/reference/checkpoint.md#integrity-and-compatibility): torch (libtorch's version),
// cuda_runtime, driver_version, gpu_name, gpu_sm, platform; no Python package versions.
FingerprintSources fingerprint_sources(int device_index);

// The current environment's fingerprint: build_fingerprint (checkpoint/fingerprint.h) of the
// probe's sources.
Fingerprint current_fingerprint(int device_index);

}  // namespace aitune
