#include "runtime/runtime.h"

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bridge/tensor_bridge.h"
#include "checkpoint/extraction_cache.h"
#include "checkpoint/semantic_path.h"
#include "checkpoint/skeleton.h"
#include "checkpoint/zip_archive.h"
#include "common/cache_dir.h"
#include "dispatch/graph_dispatch.h"
#include "env/environment.h"
#include "runners/cuda_graph_runner.h"
#include "runtime/native_support.h"
#include "runtime/runner_registry.h"
#include "runtime/safetensors_io.h"

namespace aitune {
namespace {

using json = nlohmann::json;

Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }

std::string shape_str(c10::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// A call's value against a constant leaf's recorded scalar (nullopt: a node no value equals). An
// int constant equals a float input of the same value; an int input equals only an int constant.
bool value_equals(const Value& v, const std::optional<ManifestScalar>& c) {
  if (!c) return false;
  if (std::holds_alternative<std::monostate>(v)) return std::holds_alternative<std::monostate>(*c);
  if (const bool* b = std::get_if<bool>(&v))
    return std::holds_alternative<bool>(*c) && std::get<bool>(*c) == *b;
  if (const int64_t* i = std::get_if<int64_t>(&v))
    return std::holds_alternative<int64_t>(*c) && std::get<int64_t>(*c) == *i;
  if (const double* d = std::get_if<double>(&v)) {
    if (const int64_t* ci = std::get_if<int64_t>(&*c)) return static_cast<double>(*ci) == *d;
    return std::holds_alternative<double>(*c) && std::get<double>(*c) == *d;
  }
  if (const std::string* s = std::get_if<std::string>(&v))
    return std::holds_alternative<std::string>(*c) && std::get<std::string>(*c) == *s;
  return false;
}

}  // namespace

const at::Tensor* Outputs::find(std::string_view access_path) const {
  for (const auto& [path, tensor] : items) {
    if (path == access_path) return &tensor;
  }
  return nullptr;
}

FingerprintSources fingerprint_sources(int device_index) {
  const EnvironmentInfo info = probe_environment();
  FingerprintSources s;
  s.torch = info.torch_version;
  s.cuda_runtime = info.torch_cuda_runtime;
  s.driver_version = info.driver_version;
  s.platform = host_platform();
  for (const GpuInfo& g : info.gpus) {
    if (g.index == std::max(device_index, 0)) {
      s.gpu_name = g.name;
      s.gpu_sm = std::to_string(g.sm_major) + "." + std::to_string(g.sm_minor);
    }
  }
  return s;
}

Fingerprint current_fingerprint(int device_index) {
  const FingerprintFields fields = build_fingerprint(fingerprint_sources(device_index));
  return Fingerprint(fields.begin(), fields.end());
}

struct ModuleHandle::Served {
  std::optional<dispatch::GraphDispatch> dispatch;  // rebuilt by serve() once the runner is loaded
  std::shared_ptr<Runner> runner;                   // null when not native / not loaded
  int device_index = -1;                            // the runner's CUDA index; -1: CPU
  std::shared_ptr<CudaGraphRunner> cuda_graphs;     // null when off
  Status unusable;                                  // why the graph cannot be checked (a bad saved dtype)
};

ModuleHandle::ModuleHandle() = default;
ModuleHandle::~ModuleHandle() = default;
Runtime::~Runtime() = default;

std::vector<std::string> Runtime::modules() const {
  std::vector<std::string> out;
  for (const auto& m : modules_) out.push_back(m->name());
  return out;
}

StatusOr<const ModuleHandle*> Runtime::module(const std::string& name) const {
  for (const auto& m : modules_) {
    if (m->name() == name) return static_cast<const ModuleHandle*>(m.get());
  }
  std::string known;
  for (const auto& m : modules_) known += (known.empty() ? "'" : ", '") + m->name() + "'";
  return not_found("No module '" + name + "' in checkpoint " + path_ + " (modules: " + known + ")");
}

std::vector<FileRecord> Runtime::files() const { return manifest_.files; }

StatusOr<std::string_view> Runtime::read_entry(const std::string& entry) const {
  for (const FileRecord& r : files()) {
    if (r.path == entry) return reader_->read(entry, r);
  }
  return corrupt("Entry '" + entry + "' is not listed in the manifest of " + path_);
}

Status Runtime::verify_all() const {
  std::vector<std::string> bad;
  for (const FileRecord& r : files()) {
    auto data = reader_->read(r.path, r);
    if (!data.ok()) bad.push_back(r.path);
  }
  if (!bad.empty()) {
    std::string list;
    for (const auto& b : bad) list += (list.empty() ? "'" : ", '") + b + "'";
    return corrupt("Failed to verify SHA hashes for files: [" + list + "]");
  }
  return Status::Ok();
}

namespace {

// A graph as the runtime describes it: the manifest's graph plus what this build makes of it.
GraphInfo describe_graph(const ManifestModule& module, const ManifestGraph& mg) {
  const ManifestBackend& b = mg.backend;
  GraphInfo g;
  g.name = mg.name;
  g.inputs = mg.inputs;
  g.outputs = mg.outputs;
  g.samples = mg.samples;
  g.backend_class = b.class_path;
  g.backend_name = b.name;
  g.backend_config_json = b.config_json;
  g.precision_class = b.precision_class;
  g.device = b.device;
  // Checkpoints written before the validated class was recorded (no "tf32" entry) say "fp32" for
  // every fp32 model; on CUDA torch computed those outputs with cuDNN's TF32 (on by default),
  // which is the tf32 class the tuning check used.
  if (!b.has_tf32 && g.precision_class == "fp32" && g.device.rfind("cuda", 0) == 0)
    g.precision_class = "tf32";
  g.required_fields = b.requires_;
  g.saved_cuda_graphs = b.use_cuda_graphs;
  g.input_order = b.input_order.value_or(std::vector<int>{});
  g.output_paths = b.output_paths.value_or(std::vector<std::string>{});
  g.profiles = b.profiles.value_or(std::vector<ManifestProfile>{});
  g.not_native_reason = native_unsupported_reason("graph '" + g.name + "' of module '" + module.name + "'",
                                                  g.backend_name, b.native, b.artifacts);
  g.native = g.not_native_reason.empty();
  return g;
}

// The fingerprint lines of one graph (docs/reference/checkpoint.md#integrity-and-compatibility), one
// per required field that differs.
std::vector<std::string> mismatch_lines(const Fingerprint& saved, const Fingerprint& current,
                                        const GraphInfo& g, const std::string& module) {
  std::vector<std::string> lines;
  for (const FingerprintMismatch& m : fingerprint_mismatches(saved, current, g.required_fields)) {
    lines.push_back(m.field + ": saved " + fingerprint_value_text(m.saved) + ", current " +
                    fingerprint_value_text(m.current) + " (" + g.backend_name + " of module '" + module +
                    "' graph '" + g.name + "')");
  }
  return lines;
}

}  // namespace

StatusOr<std::unique_ptr<Runtime>> Runtime::load(const std::string& path, const LoadOptions& options) {
  try {
    if (!std::filesystem::exists(path)) return not_found("Checkpoint file not found: " + path);
    std::unique_ptr<Runtime> rt(new Runtime());
    AITUNE_RETURN_IF_ERROR(rt->open_archive(path));
    std::vector<FileRecord> to_extract;
    AITUNE_RETURN_IF_ERROR(rt->build_modules(options, &to_extract));
    if (options.load_runners && !to_extract.empty())
      AITUNE_RETURN_IF_ERROR(rt->load_runners(options, to_extract));
    return rt;
  } catch (const std::exception& e) {
    return corrupt(std::string("Failed to read checkpoint ") + path + ": " + e.what());
  }
}

namespace {

// Python's repr of a leaf's semantic path, as the Python dispatcher words input errors: a string
// path is a parameter name ("x" -> 'x'); a tuple path is already displayed as its repr.
std::string path_repr(const std::string& semantic_path) {
  if (!semantic_path.empty() && semantic_path.front() == '(') return semantic_path;
  return "'" + semantic_path + "'";
}

}  // namespace

void ModuleHandle::add_graph(GraphInfo g) {
  Served served;
  std::vector<dispatch::InputRule> rules;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const LeafInfo& leaf = g.inputs[i];
    if (!leaf.is_tensor) continue;
    dispatch::InputRule rule;
    rule.leaf = i;
    if (auto dtype = dtype_from_name(leaf.dtype); dtype.ok()) {
      rule.dtypes.push_back(*dtype);
    } else if (served.unusable.ok()) {
      served.unusable = corrupt("input '" + leaf.semantic_path + "' of graph '" + g.name + "' of module '" +
                                name_ + "' has the unknown dtype '" + leaf.dtype + "'");
    }
    rule.path_repr = path_repr(leaf.semantic_path);
    rule.tensor_name = leaf.name;
    const size_t k = rules.size();  // the profile of the k-th tensor input
    if (k < g.profiles.size() && g.profiles[k].bounded) {
      const ProfileRange& profile = g.profiles[k];
      rule.range = dispatch::ShapeRange::kProfile;
      rule.min_shape = profile.min;
      for (size_t axis = 0; axis < profile.min.size(); ++axis) {
        const bool bounded = axis < profile.max.size() && profile.max[axis];
        rule.max_shape.push_back(bounded ? *profile.max[axis] : dispatch::kNoUpperBound);
      }
    }
    rules.push_back(std::move(rule));
  }
  std::vector<int64_t> order(g.input_order.begin(), g.input_order.end());
  if (order.empty()) {  // none saved: the tensor inputs in order
    for (size_t i = 0; i < rules.size(); ++i) order.push_back(static_cast<int64_t>(i));
  }
  served.dispatch.emplace(g.name, name_, g.backend_name + "()", std::move(rules), nullptr, std::move(order),
                          g.output_paths);
  graphs_.push_back(std::move(g));
  served_.push_back(std::move(served));
}

void ModuleHandle::serve(size_t index, std::shared_ptr<Runner> runner, int device_index,
                         std::shared_ptr<CudaGraphRunner> cuda_graphs) {
  Served& served = served_[index];
  const dispatch::GraphDispatch& old = *served.dispatch;
  std::shared_ptr<Runner> serving =
      cuda_graphs ? std::shared_ptr<Runner>(cuda_graphs) : std::shared_ptr<Runner>(runner);
  dispatch::GraphDispatch record(old.graph(), old.module(), old.backend(), old.rules(), std::move(serving),
                                 old.input_order(), graphs_[index].output_paths);
  served.dispatch.reset();
  served.dispatch.emplace(std::move(record));
  served.runner = std::move(runner);
  served.device_index = device_index;
  served.cuda_graphs = std::move(cuda_graphs);
}

// The archive's structure (ArchiveReader::open, which also refuses a pickled reference-format
// file), the manifest schema (the one check Python's ait.load runs too) and the file listing.
Status Runtime::open_archive(const std::string& path) {
  path_ = path;
  AITUNE_ASSIGN_OR_RETURN(ArchiveReader reader, ArchiveReader::open(path));
  reader_ = std::make_unique<ArchiveReader>(std::move(reader));
  auto manifest = read_manifest(reader_->manifest_bytes());
  if (!manifest.ok()) return Status(manifest.status().code(), path + ": " + manifest.status().message());
  manifest_ = std::move(manifest).value();
  return reader_->check_listed(manifest_.files);
}

// One ModuleHandle per manifest module; compares each graph's required fingerprint fields and
// collects the artifacts of the natively served graphs.
Status Runtime::build_modules(const LoadOptions& options, std::vector<FileRecord>* to_extract) {
  const Fingerprint current = current_fingerprint(options.device_index);
  std::vector<std::string> all_mismatches;
  for (const ManifestModule& mm : manifest_.modules) {
    std::unique_ptr<ModuleHandle> handle(new ModuleHandle());
    handle->name_ = mm.name;
    handle->runtime_ = this;
    for (const ManifestGraph& mg : mm.graphs) {
      GraphInfo g = describe_graph(mm, mg);
      const std::vector<std::string> lines = mismatch_lines(manifest_.fingerprint, current, g, mm.name);
      for (const auto& l : lines) g.incompatible += (g.incompatible.empty() ? "" : "\n") + l;
      all_mismatches.insert(all_mismatches.end(), lines.begin(), lines.end());
      if (g.native) {
        const std::string& entry = mg.backend.artifacts.at(*runnable_artifact(mg.backend.artifacts));
        const auto record = std::find_if(manifest_.files.begin(), manifest_.files.end(),
                                         [&](const FileRecord& r) { return r.path == entry; });
        if (record == manifest_.files.end())
          return corrupt("Artifact '" + entry + "' is not listed in the manifest of " + path_);
        to_extract->push_back(*record);
      }
      handle->add_graph(std::move(g));
    }
    modules_.push_back(std::move(handle));
  }
  if (!all_mismatches.empty() && !options.allow_incompatible) {
    std::string msg = "Checkpoint " + path_ + " is incompatible with this environment:";
    for (const auto& l : all_mismatches) msg += "\n" + l;
    return Status(StatusCode::kIncompatible, msg);
  }
  return Status::Ok();
}

// Extracts the native artifacts once (extraction_cache.h) and loads each compatible native
// graph's runner through the runner registry, wrapped in a CUDA-graph runner when asked.
Status Runtime::load_runners(const LoadOptions& options, const std::vector<FileRecord>& to_extract) {
  const std::string cache_dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  AITUNE_ASSIGN_OR_RETURN(std::string root,
                          extract_all(*reader_, to_extract, cache_dir + "/checkpoints", options.verify_full));
  for (size_t mi = 0; mi < modules_.size(); ++mi) {
    ModuleHandle& handle = *modules_[mi];
    for (size_t i = 0; i < handle.graphs_.size(); ++i) {
      const GraphInfo& g = handle.graphs_[i];
      if (!g.native || !g.incompatible.empty()) continue;
      const bool cuda_package = g.device.rfind("cuda", 0) == 0;
      if (cuda_package && options.device_index < 0)
        return Status(StatusCode::kBackendUnavailable, "graph '" + g.name + "' of module '" + handle.name_ +
                                                           "' was compiled for CUDA (" + g.device +
                                                           ") and cannot run on the CPU");
      const auto& artifacts = manifest_.modules[mi].graphs[i].backend.artifacts;
      const std::optional<std::string> key = runnable_artifact(artifacts);
      const std::optional<RunnerFactory> factory =
          key ? find_runner_factory(artifact_kind(*key)) : std::nullopt;
      if (!factory)  // unregistered since build_modules
        return Status(StatusCode::kBackendUnavailable,
                      "graph '" + g.name + "' of module '" + handle.name_ + "' has no registered runner");
      AITUNE_ASSIGN_OR_RETURN(LoadedRunner loaded, (*factory)(root + "/" + artifacts.at(*key),
                                                              cuda_package ? options.device_index : -1));
      // CUDA graphs as saved unless the caller says otherwise (docs/reference/native.md#runtime-api); CPU
      // graphs never.
      const bool graphs = cuda_package && options.cuda_graphs.enabled.value_or(g.saved_cuda_graphs);
      std::shared_ptr<CudaGraphRunner> cuda_graphs;
      if (graphs) {
        CudaGraphOptions go;
        go.cache_size = options.cuda_graphs.cache_size;
        go.clone_outputs = options.cuda_graphs.clone_outputs;
        go.enabled = !CudaGraphRunner::cuda_graphs_disabled_by_env();
        cuda_graphs = std::make_shared<CudaGraphRunner>(loaded.runner, go);
      }
      handle.graphs_[i].cuda_graphs = graphs && !CudaGraphRunner::cuda_graphs_disabled_by_env();
      handle.serve(i, std::move(loaded.runner), loaded.device_index, std::move(cuda_graphs));
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<at::Tensor>> ModuleHandle::bind(size_t gi, const Inputs& inputs,
                                                     bool check_ranks) const {
  const GraphInfo& g = graphs_[gi];
  std::vector<at::Tensor> tensors;
  std::vector<size_t> tensor_leaf;  // leaf index of each tensor leaf
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (g.inputs[i].is_tensor) tensor_leaf.push_back(i);
  }
  tensors.resize(tensor_leaf.size());
  for (const auto& [key, value] : inputs) {
    const std::optional<size_t> i = find_input_leaf(g, key);
    if (!i) return graph_not_found("graph '" + g.name + "' has no input '" + key + "'");
    const LeafInfo& leaf = g.inputs[*i];
    if (!leaf.is_tensor) {
      if (!value_equals(value, leaf.scalar))
        return graph_not_found("input '" + key + "' differs from the constant recorded for graph '" + g.name +
                               "'");
      continue;
    }
    const at::Tensor* t = std::get_if<at::Tensor>(&value);
    if (t == nullptr || !t->defined()) return graph_not_found("input '" + key + "' is not a tensor");
    const size_t ti = std::find(tensor_leaf.begin(), tensor_leaf.end(), *i) - tensor_leaf.begin();
    if (check_ranks && static_cast<size_t>(t->dim()) != leaf.min_shape.size())
      return graph_not_found("input '" + key + "' has rank " + std::to_string(t->dim()) + ", graph '" +
                             g.name + "' expects " + std::to_string(leaf.min_shape.size()));
    tensors[ti] = *t;
  }
  for (size_t ti = 0; ti < tensors.size(); ++ti) {
    if (!tensors[ti].defined())
      return graph_not_found("input '" + g.inputs[tensor_leaf[ti]].semantic_path + "' (tensor '" +
                             g.inputs[tensor_leaf[ti]].name + "') of graph '" + g.name + "' is missing");
  }
  return tensors;
}

std::optional<size_t> find_input_leaf(const GraphInfo& graph, std::string_view key) {
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const LeafInfo& leaf = graph.inputs[i];
    if (key == leaf.semantic_path || key == leaf.access_path || (!leaf.name.empty() && key == leaf.name))
      return i;
  }
  return std::nullopt;
}

StatusOr<Outputs> ModuleHandle::run(const Inputs& inputs) const {
  for (size_t gi = 0; gi < graphs_.size(); ++gi) {
    auto bound = bind(gi, inputs, /*check_ranks=*/true);
    if (bound.ok()) return run_index(gi, bound.value());
  }
  return no_graph_for(inputs);
}

StatusOr<std::string> ModuleHandle::select_graph(const Inputs& inputs) const {
  for (size_t gi = 0; gi < graphs_.size(); ++gi) {
    if (bind(gi, inputs, /*check_ranks=*/true).ok()) return graphs_[gi].name;
  }
  return no_graph_for(inputs);
}

Status ModuleHandle::no_graph_for(const Inputs& inputs) const {
  std::string given, known;
  for (const auto& [key, value] : inputs) {
    if (!given.empty()) given += ", ";
    given += key;
    if (const at::Tensor* t = std::get_if<at::Tensor>(&value); t && t->defined()) {
      given += ' ';
      given += shape_str(t->sizes());
    }
  }
  for (const GraphInfo& g : graphs_) {
    std::string names;
    for (const LeafInfo& l : g.inputs) {
      if (l.is_tensor)
        names += (names.empty() ? "" : ", ") + l.semantic_path + " (rank " +
                 std::to_string(l.min_shape.size()) + ")";
    }
    known += "\n  graph '" + g.name + "': " + names;
  }
  return graph_not_found("No graph of module '" + name_ + "' takes the inputs {" + given +
                         "}; known graphs:" + known);
}

StatusOr<Outputs> ModuleHandle::run_graph(const std::string& graph, const Inputs& inputs) const {
  for (size_t gi = 0; gi < graphs_.size(); ++gi) {
    if (graphs_[gi].name != graph) continue;
    AITUNE_ASSIGN_OR_RETURN(std::vector<at::Tensor> tensors, bind(gi, inputs, /*check_ranks=*/false));
    return run_index(gi, tensors);
  }
  std::string known;
  for (const GraphInfo& g : graphs_) known += (known.empty() ? "'" : ", '") + g.name + "'";
  return graph_not_found("Module '" + name_ + "' has no graph '" + graph + "' (graphs: " + known + ")");
}

StatusOr<Outputs> ModuleHandle::run_index(size_t gi, const std::vector<at::Tensor>& tensors) const {
  const GraphInfo& g = graphs_[gi];
  const Served& served = served_[gi];
  if (!g.native) return Status(StatusCode::kBackendUnavailable, g.not_native_reason);
  if (!g.incompatible.empty())
    return Status(StatusCode::kIncompatible,
                  "graph '" + g.name + "' of module '" + name_ + "' is incompatible: " + g.incompatible);
  Runner* runner = served.runner.get();
  if (runner == nullptr)
    return Status(StatusCode::kBackendUnavailable,
                  "graph '" + g.name + "' of module '" + name_ + "' was not loaded");
  AITUNE_RETURN_IF_ERROR(served.unusable);
  const dispatch::GraphDispatch& core = *served.dispatch;
  try {
    // The input check shared with the Python dispatcher (docs/reference/dispatch.md#input-check). Only
    // profiles are checked here, so no envelope is ever reported.
    AITUNE_RETURN_IF_ERROR(core.check_inputs([&](size_t i) -> const at::Tensor& { return tensors[i]; },
                                             [](const dispatch::InputRule&, const at::Tensor&) {}));
    AITUNE_RETURN_IF_ERROR(core.check_input_order());
    // Unlike the Python path, inputs come from any device: move them to the package's.
    const c10::Device device =
        served.device_index >= 0 ? c10::Device(c10::kCUDA, served.device_index) : c10::Device(c10::kCPU);
    const std::vector<at::Tensor> ordered =
        core.runner_inputs([&](size_t i) { return tensors[i].to(device); });
    AITUNE_ASSIGN_OR_RETURN(std::vector<at::Tensor> outs, core.run(ordered));
    Outputs result;
    for (size_t i = 0; i < outs.size(); ++i)
      result.items.emplace_back(core.output_name(i), std::move(outs[i]));
    return result;
  } catch (const std::exception& e) {
    return Status(StatusCode::kBackendError, std::string("Running graph '") + g.name + "' of module '" +
                                                 name_ + "' failed: " + e.what());
  }
}

std::optional<CudaGraphCounters> ModuleHandle::cuda_graph_counters(const std::string& graph) const {
  for (size_t i = 0; i < graphs_.size(); ++i) {
    if (graphs_[i].name != graph || !served_[i].cuda_graphs) continue;
    return served_[i].cuda_graphs->stats();
  }
  return std::nullopt;
}

StatusOr<StoredSample> ModuleHandle::sample(const std::string& graph, size_t index) const {
  const GraphInfo* g = nullptr;
  for (const GraphInfo& gi : graphs_) {
    if (gi.name == graph) g = &gi;
  }
  if (g == nullptr) return graph_not_found("Module '" + name_ + "' has no graph '" + graph + "'");
  if (index >= g->samples.size())
    return not_found("graph '" + graph + "' of module '" + name_ + "' has no stored sample " +
                     std::to_string(index) + " (the checkpoint holds " + std::to_string(g->samples.size()) +
                     "; save with include_samples=True)");
  const std::string prefix = g->samples[index];
  AITUNE_ASSIGN_OR_RETURN(std::string_view blob, runtime_->read_entry(prefix + ".safetensors"));
  AITUNE_ASSIGN_OR_RETURN(std::string_view skel_bytes, runtime_->read_entry(prefix + ".json"));
  AITUNE_ASSIGN_OR_RETURN(NamedTensors tensors, parse_safetensors(blob));
  json skel = json::parse(skel_bytes, nullptr, false);
  if (skel.is_discarded() || !skel.is_object())
    return corrupt("Sample skeleton " + prefix + ".json is not JSON");
  std::map<std::string, at::Tensor> by_key(tensors.begin(), tensors.end());
  try {
    // Positional arguments are named by the forward signature.
    std::vector<std::string> params;
    for (const ManifestModule& mm : runtime_->manifest().modules) {
      if (mm.name != name_) continue;
      for (const ManifestParam& p : mm.forward_signature) params.push_back(p.name);
    }
    const std::vector<SkeletonTensor> found = sample_input_tensors(skel, params);
    StoredSample s;
    s.batch_size =
        skel.value("batch_size", json()).is_number_integer() ? skel["batch_size"].get<int64_t>() : 0;
    size_t t_index = 0;
    for (const LeafInfo& leaf : g->inputs) {
      if (!leaf.is_tensor) continue;
      std::string key;
      for (const SkeletonTensor& t : found) {
        if (semantic_display(t.path) == leaf.semantic_path) key = t.key;
      }
      if (key.empty() && t_index < found.size()) key = found[t_index].key;  // flattening order
      ++t_index;
      if (key.empty() || !by_key.count(key))
        return corrupt("Sample " + prefix + " lacks input '" + leaf.semantic_path + "'");
      s.inputs[leaf.name] = by_key[key];
    }
    if (skel.contains("reference_output")) {
      const std::vector<SkeletonTensor> outs = sample_output_tensors(skel);
      size_t o_index = 0;
      for (const LeafInfo& leaf : g->outputs) {
        if (!leaf.is_tensor) continue;
        std::string key;
        for (const auto& [path, k] : outs) {
          const std::string disp = path.is_array() && path.empty()
                                       ? "()"
                                       : semantic_display(path.is_string() ? json{{"tuple", {path}}} : path);
          if (disp == leaf.semantic_path || semantic_display(path) == leaf.semantic_path) key = k;
        }
        if (key.empty() && o_index < outs.size()) key = outs[o_index].key;
        ++o_index;
        if (!key.empty() && by_key.count(key)) s.reference.emplace_back(leaf.access_path, by_key[key]);
      }
    }
    return s;
  } catch (const std::exception& e) {
    return corrupt("Sample " + prefix + " is malformed: " + e.what());
  }
}

}  // namespace aitune
