#include "runtime/runtime.h"

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "bridge/tensor_bridge.h"
#include "checkpoint/extraction_cache.h"
#include "checkpoint/manifest_schema.h"
#include "checkpoint/zip_archive.h"
#include "dispatch/graph_dispatch.h"
#include "env/environment.h"
#include "runners/aoti_runner.h"
#include "runners/cuda_graph_runner.h"
#include "runtime/native_support.h"
#include "runtime/safetensors_io.h"

namespace aitune {
namespace {

using json = nlohmann::json;

Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }

std::string py_repr(const json& v) {
  if (v.is_string()) return "'" + v.get<std::string>() + "'";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return v.dump();
}

// "x" or "('options', 'mask')" (Python's repr of the tuple).
std::string semantic_display(const json& path) {
  if (path.is_string()) return path.get<std::string>();
  if (path.is_object() && path.contains("tuple")) {
    const json& items = path["tuple"];
    std::string out = "(";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + py_repr(items[i]);
    if (items.size() == 1) out += ",";
    return out + ")";
  }
  return path.dump();
}

std::string short_class(const std::string& qualified) {
  const auto dot = qualified.rfind('.');
  return dot == std::string::npos ? qualified : qualified.substr(dot + 1);
}

std::string shape_str(c10::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string strip_local(const std::string& v) { return v.substr(0, v.find('+')); }
std::string major_of(const json& v) {
  if (!v.is_string()) return "";
  std::string s = v.get<std::string>();
  return s.substr(0, s.find('.'));
}
std::string json_text(const json& v) { return v.is_string() ? v.get<std::string>() : (v.is_null() ? "None" : v.dump()); }

LeafInfo parse_leaf(const json& j) {
  LeafInfo leaf;
  leaf.semantic_path = semantic_display(j.value("semantic_path", json()));
  leaf.access_path = j.value("access_path", "");
  if (j.contains("value")) {
    leaf.is_tensor = false;
    leaf.value = j["value"];
    return leaf;
  }
  leaf.name = j.value("name", "");
  for (const json& d : j.value("shape", json::array())) leaf.shape.push_back(d.is_string() ? d.get<std::string>() : d.dump());
  leaf.axis_kinds = j.value("axis_kinds", std::vector<std::string>{});
  leaf.min_shape = j.value("min_shape", std::vector<int64_t>{});
  leaf.max_shape = j.value("max_shape", std::vector<int64_t>{});
  leaf.dtype = j.value("dtype", "");
  return leaf;
}

std::string default_cache_dir() {
  if (const char* env = std::getenv("AITUNE_CACHE_DIR"); env && *env) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/aitune";
}

bool value_equals(const Value& v, const json& node) {
  if (!node.is_object() || !node.contains("value")) return false;
  const json& c = node["value"];
  if (std::holds_alternative<std::monostate>(v)) return c.is_null();
  if (const bool* b = std::get_if<bool>(&v)) return c.is_boolean() && c.get<bool>() == *b;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return c.is_number_integer() && c.get<int64_t>() == *i;
  if (const double* d = std::get_if<double>(&v)) return c.is_number() && c.get<double>() == *d;
  if (const std::string* s = std::get_if<std::string>(&v)) return c.is_string() && c.get<std::string>() == *s;
  return false;
}

// Walks a sample skeleton node, collecting tensors with their path steps.
void walk(const json& node, std::vector<json>& steps, std::vector<std::pair<json, std::string>>& out) {
  if (!node.is_object()) return;
  if (node.contains("tensor")) {
    json path = steps.size() == 1 ? steps[0] : json{{"tuple", steps}};
    out.emplace_back(path, node["tensor"].get<std::string>());
    return;
  }
  auto seq = [&](const json& items) {
    for (size_t i = 0; i < items.size(); ++i) {
      steps.push_back(static_cast<int64_t>(i));
      walk(items[i], steps, out);
      steps.pop_back();
    }
  };
  if (node.contains("tuple")) return seq(node["tuple"]);
  if (node.contains("list")) return seq(node["list"]);
  if (node.contains("namedtuple")) return seq(node["items"]);
  if (node.contains("dict") || node.contains("mapping")) {
    for (const json& kv : node.contains("dict") ? node["dict"] : node["items"]) {
      steps.push_back(kv[0]);
      walk(kv[1], steps, out);
      steps.pop_back();
    }
    return;
  }
  if (node.contains("dataclass")) {
    for (const auto& [k, v] : node["fields"].items()) {
      steps.push_back(k);
      walk(v, steps, out);
      steps.pop_back();
    }
  }
}

}  // namespace

const at::Tensor* Outputs::find(std::string_view access_path) const {
  for (const auto& [path, tensor] : items) {
    if (path == access_path) return &tensor;
  }
  return nullptr;
}

json current_fingerprint(int device_index) {
  const EnvironmentInfo info = probe_environment();
  json fp = {{"torch", info.torch_version}, {"cuda_runtime", info.torch_cuda_runtime.empty() ? json() : json(info.torch_cuda_runtime)},
             {"driver_version", info.driver_version.empty() ? json() : json(info.driver_version)},
             {"gpu_name", json()}, {"gpu_sm", json()}};
  for (const GpuInfo& g : info.gpus) {
    if (g.index == std::max(device_index, 0)) {
      fp["gpu_name"] = g.name;
      fp["gpu_sm"] = std::to_string(g.sm_major) + "." + std::to_string(g.sm_minor);
    }
  }
  return fp;
}

struct ModuleHandle::Served {
  std::optional<dispatch::GraphDispatch> dispatch;  // rebuilt by serve() once the runner is loaded
  std::shared_ptr<AotiRunner> runner;               // null when not native / not loaded
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

const json& Runtime::fingerprint() const {
  static const json empty = json::object();
  return manifest_.contains("fingerprint") ? manifest_["fingerprint"] : empty;
}

std::vector<FileRecord> Runtime::files() const {
  std::vector<FileRecord> out;
  for (const json& f : manifest_.value("files", json::array())) {
    out.push_back({f.value("path", ""), f.value("size", uint64_t{0}), f.value("sha256", "")});
  }
  return out;
}

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

StatusOr<std::unique_ptr<Runtime>> Runtime::load(const std::string& path, const LoadOptions& options) {
  try {
    if (!std::filesystem::exists(path)) return not_found("Checkpoint file not found: " + path);
    std::unique_ptr<Runtime> rt(new Runtime());
    rt->path_ = path;
    AITUNE_ASSIGN_OR_RETURN(ArchiveReader reader, ArchiveReader::open(path));
    rt->reader_ = std::make_unique<ArchiveReader>(std::move(reader));
    for (const std::string& n : rt->reader_->entry_names()) {
      if (n == "state_dict.pt" || (n.size() > 14 && n.substr(n.size() - 14) == "/state_dict.pt"))
        return unsupported(path + " is a checkpoint of the reference implementation: it stores a pickled state "
                                  "that would execute code when loaded, so aitune refuses it. Re-tune the model and "
                                  "save it with aitune.");
    }
    // The one manifest check Python's ait.load runs too (nesting, types, names, references).
    auto parsed = parse_manifest(rt->reader_->manifest_bytes());
    if (!parsed.ok()) return Status(parsed.status().code(), path + ": " + parsed.status().message());
    rt->manifest_ = std::move(parsed).value();
    const json& m = rt->manifest_;
    AITUNE_RETURN_IF_ERROR(rt->reader_->check_listed(rt->files()));

    const json current = current_fingerprint(options.device_index);
    const json& saved = rt->fingerprint();
    std::vector<std::string> mismatch_lines;
    std::vector<FileRecord> to_extract;
    const std::vector<FileRecord> records = rt->files();

    for (const json& mj : m.value("modules", json::array())) {
      std::unique_ptr<ModuleHandle> handle(new ModuleHandle());
      handle->name_ = mj.value("name", "");
      handle->runtime_ = rt.get();
      for (const json& gj : mj.value("graphs", json::array())) {
        GraphInfo g;
        g.name = gj.value("name", "");
        for (const json& l : gj["input_spec"].value("leaves", json::array())) g.inputs.push_back(parse_leaf(l));
        for (const json& l : gj["output_spec"].value("leaves", json::array())) g.outputs.push_back(parse_leaf(l));
        g.samples = gj.value("samples", std::vector<std::string>{});
        const json& b = gj.value("backend", json::object());
        g.backend_class = b.value("class", "");
        g.backend_name = short_class(g.backend_class);
        g.backend_config = b.value("config", json());
        g.precision_class = b.value("precision_class", json("fp32")).is_string() ? b.value("precision_class", "fp32") : "fp32";
        g.device = b.value("device", json()).is_string() ? b["device"].get<std::string>() : "";
        // Checkpoints written before the validated class was recorded (no "tf32" entry) say
        // "fp32" for every fp32 model; on CUDA torch computed those outputs with cuDNN's TF32
        // (on by default), which is the tf32 class the tuning check used.
        if (!b.contains("tf32") && g.precision_class == "fp32" && g.device.rfind("cuda", 0) == 0) {
          g.precision_class = "tf32";
        }
        g.required_fields = b.value("requires", std::vector<std::string>{});
        g.saved_cuda_graphs = g.backend_config.is_object() && g.backend_config.value("use_cuda_graphs", json(false)).is_boolean() &&
                              g.backend_config.value("use_cuda_graphs", false);
        if (b.value("input_order", json()).is_array()) g.input_order = b["input_order"].get<std::vector<int>>();
        if (b.value("output_paths", json()).is_array()) g.output_paths = b["output_paths"].get<std::vector<std::string>>();
        if (b.value("profiles", json()).is_array()) {
          for (const json& p : b["profiles"]) {
            ProfileRange r;
            if (p.is_null()) {  // the schema allows it: no hard range for this input
              r.bounded = false;
              g.profiles.push_back(std::move(r));
              continue;
            }
            r.min = p.at(0).get<std::vector<int64_t>>();
            for (const json& d : p.at(1)) r.max.push_back(d.is_null() ? std::nullopt : std::optional<int64_t>(d.get<int64_t>()));
            g.profiles.push_back(std::move(r));
          }
        }
        const json artifacts = b.value("artifacts", json::object());
        const bool native_flag = b.value("native", false);
        g.not_native_reason = native_unsupported_reason("graph '" + g.name + "' of module '" + handle->name_ + "'",
                                                        g.backend_name, native_flag, artifacts.contains("package"),
                                                        artifacts.contains("plan"));
        g.native = g.not_native_reason.empty();
        // Fingerprint (docs/reference/checkpoint.md#integrity-and-compatibility).
        std::vector<std::string> lines;
        for (const std::string& field : g.required_fields) {
          std::string a, c;
          bool differs;
          if (field == "cuda_major") {
            a = major_of(saved.value("cuda_runtime", json()));
            c = major_of(current.value("cuda_runtime", json()));
            differs = a != c;
          } else if (field == "torch") {
            a = json_text(saved.value("torch", json()));
            c = json_text(current.value("torch", json()));
            differs = strip_local(a) != strip_local(c);  // libtorch reports no local suffix (+cu130)
          } else {
            a = json_text(saved.value(field, json()));
            c = json_text(current.value(field, json()));
            differs = a != c;
          }
          if (differs)
            lines.push_back(field + ": saved " + a + ", current " + c + " (" + g.backend_name + " of module '" +
                            handle->name_ + "' graph '" + g.name + "')");
        }
        for (const auto& l : lines) g.incompatible += (g.incompatible.empty() ? "" : "\n") + l;
        mismatch_lines.insert(mismatch_lines.end(), lines.begin(), lines.end());
        if (g.native) {
          const std::string entry = artifacts["package"].get<std::string>();
          bool listed = false;
          for (const FileRecord& r : records) {
            if (r.path == entry) {
              to_extract.push_back(r);
              listed = true;
            }
          }
          if (!listed) return corrupt("Artifact '" + entry + "' is not listed in the manifest of " + path);
        }
        handle->add_graph(std::move(g));
      }
      rt->modules_.push_back(std::move(handle));
    }
    if (!mismatch_lines.empty() && !options.allow_incompatible) {
      std::string msg = "Checkpoint " + path + " is incompatible with this environment:";
      for (const auto& l : mismatch_lines) msg += "\n" + l;
      return Status(StatusCode::kIncompatible, msg);
    }
    if (!options.load_runners || to_extract.empty()) return rt;

    const std::string cache_dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
    AITUNE_ASSIGN_OR_RETURN(std::string root,
                            extract_all(*rt->reader_, to_extract, cache_dir + "/checkpoints", options.verify_full));
    for (auto& handle : rt->modules_) {
      for (size_t i = 0; i < handle->graphs_.size(); ++i) {
        const GraphInfo& g = handle->graphs_[i];
        if (!g.native || !g.incompatible.empty()) continue;
        const bool cuda_package = g.device.rfind("cuda", 0) == 0;
        if (cuda_package && options.device_index < 0)
          return Status(StatusCode::kBackendUnavailable, "graph '" + g.name + "' of module '" + handle->name_ +
                                                             "' was compiled for CUDA (" + g.device +
                                                             ") and cannot run on the CPU");
        const std::string entry = m["modules"].size() ? "" : "";
        (void)entry;
        std::string package;
        for (const json& mj : m["modules"]) {
          if (mj.value("name", "") != handle->name_) continue;
          for (const json& gj : mj["graphs"]) {
            if (gj.value("name", "") == g.name) package = gj["backend"]["artifacts"]["package"].get<std::string>();
          }
        }
        AITUNE_ASSIGN_OR_RETURN(std::unique_ptr<AotiRunner> loaded,
                                AotiRunner::load(root + "/" + package, cuda_package ? options.device_index : -1));
        std::shared_ptr<AotiRunner> runner = std::move(loaded);
        // CUDA graphs as saved unless the caller says otherwise (docs/reference/native.md#runtime-api); CPU
        // graphs never.
        const bool graphs = cuda_package && options.cuda_graphs.enabled.value_or(g.saved_cuda_graphs);
        std::shared_ptr<CudaGraphRunner> cuda_graphs;
        if (graphs) {
          CudaGraphOptions go;
          go.cache_size = options.cuda_graphs.cache_size;
          go.clone_outputs = options.cuda_graphs.clone_outputs;
          go.enabled = !CudaGraphRunner::cuda_graphs_disabled_by_env();
          cuda_graphs = std::make_shared<CudaGraphRunner>(runner, go);
        }
        handle->graphs_[i].cuda_graphs = graphs && !CudaGraphRunner::cuda_graphs_disabled_by_env();
        handle->serve(i, std::move(runner), std::move(cuda_graphs));
      }
    }
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
      served.unusable = corrupt("input '" + leaf.semantic_path + "' of graph '" + g.name + "' of module '" + name_ +
                                "' has the unknown dtype '" + leaf.dtype + "'");
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

void ModuleHandle::serve(size_t index, std::shared_ptr<AotiRunner> runner,
                         std::shared_ptr<CudaGraphRunner> cuda_graphs) {
  Served& served = served_[index];
  const dispatch::GraphDispatch& old = *served.dispatch;
  std::shared_ptr<Runner> serving = cuda_graphs ? std::shared_ptr<Runner>(cuda_graphs) : std::shared_ptr<Runner>(runner);
  dispatch::GraphDispatch record(old.graph(), old.module(), old.backend(), old.rules(), std::move(serving),
                                 old.input_order(), graphs_[index].output_paths);
  served.dispatch.reset();
  served.dispatch.emplace(std::move(record));
  served.runner = std::move(runner);
  served.cuda_graphs = std::move(cuda_graphs);
}

StatusOr<std::vector<at::Tensor>> ModuleHandle::bind(size_t gi, const Inputs& inputs, bool check_ranks) const {
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
      if (!value_equals(value, leaf.value))
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
      if (l.is_tensor) names += (names.empty() ? "" : ", ") + l.semantic_path + " (rank " + std::to_string(l.min_shape.size()) + ")";
    }
    known += "\n  graph '" + g.name + "': " + names;
  }
  return graph_not_found("No graph of module '" + name_ + "' takes the inputs {" + given + "}; known graphs:" + known);
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
    return Status(StatusCode::kIncompatible, "graph '" + g.name + "' of module '" + name_ + "' is incompatible: " + g.incompatible);
  const AotiRunner* runner = served.runner.get();
  if (runner == nullptr)
    return Status(StatusCode::kBackendUnavailable, "graph '" + g.name + "' of module '" + name_ + "' was not loaded");
  AITUNE_RETURN_IF_ERROR(served.unusable);
  const dispatch::GraphDispatch& core = *served.dispatch;
  try {
    // The input check shared with the Python dispatcher (docs/reference/dispatch.md#input-check). Only
    // profiles are checked here, so no envelope is ever reported.
    AITUNE_RETURN_IF_ERROR(core.check_inputs([&](size_t i) -> const at::Tensor& { return tensors[i]; },
                                             [](const dispatch::InputRule&, const at::Tensor&) {}));
    AITUNE_RETURN_IF_ERROR(core.check_input_order());
    // Unlike the Python path, inputs come from any device: move them to the package's.
    const c10::Device device = runner->is_cuda() ? c10::Device(c10::kCUDA, runner->device_index()) : c10::Device(c10::kCPU);
    const std::vector<at::Tensor> ordered = core.runner_inputs([&](size_t i) { return tensors[i].to(device); });
    AITUNE_ASSIGN_OR_RETURN(std::vector<at::Tensor> outs, core.run(ordered));
    Outputs result;
    for (size_t i = 0; i < outs.size(); ++i) result.items.emplace_back(core.output_name(i), std::move(outs[i]));
    return result;
  } catch (const std::exception& e) {
    return Status(StatusCode::kBackendError, std::string("Running graph '") + g.name + "' of module '" + name_ + "' failed: " + e.what());
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
    return not_found("graph '" + graph + "' of module '" + name_ + "' has no stored sample " + std::to_string(index) +
                     " (the checkpoint holds " + std::to_string(g->samples.size()) + "; save with include_samples=True)");
  const std::string prefix = g->samples[index];
  AITUNE_ASSIGN_OR_RETURN(std::string_view blob, runtime_->read_entry(prefix + ".safetensors"));
  AITUNE_ASSIGN_OR_RETURN(std::string_view skel_bytes, runtime_->read_entry(prefix + ".json"));
  AITUNE_ASSIGN_OR_RETURN(NamedTensors tensors, parse_safetensors(blob));
  json skel = json::parse(skel_bytes, nullptr, false);
  if (skel.is_discarded() || !skel.is_object()) return corrupt("Sample skeleton " + prefix + ".json is not JSON");
  std::map<std::string, at::Tensor> by_key(tensors.begin(), tensors.end());
  try {
    // Positional arguments are named by the forward signature.
    std::vector<std::string> params;
    for (const json& mj : runtime_->manifest()["modules"]) {
      if (mj.value("name", "") != name_) continue;
      for (const json& p : mj.value("forward_signature", json::array())) params.push_back(p.value("name", ""));
    }
    std::vector<std::pair<json, std::string>> found;
    std::vector<json> steps;
    const json& args = skel.value("args", json::object());
    if (args.contains("tuple") || args.contains("list")) {
      const json& items = args.contains("tuple") ? args["tuple"] : args["list"];
      for (size_t i = 0; i < items.size(); ++i) {
        steps = {i < params.size() ? json(params[i]) : json(static_cast<int64_t>(i))};
        walk(items[i], steps, found);
      }
    }
    const json& kwargs = skel.value("kwargs", json::object());
    if (kwargs.contains("dict")) {
      for (const json& kv : kwargs["dict"]) {
        steps = {kv[0]};
        walk(kv[1], steps, found);
      }
    }
    StoredSample s;
    s.batch_size = skel.value("batch_size", json()).is_number_integer() ? skel["batch_size"].get<int64_t>() : 0;
    size_t t_index = 0;
    for (const LeafInfo& leaf : g->inputs) {
      if (!leaf.is_tensor) continue;
      std::string key;
      for (const auto& [path, k] : found) {
        if (semantic_display(path) == leaf.semantic_path) key = k;
      }
      if (key.empty() && t_index < found.size()) key = found[t_index].second;  // flattening order
      ++t_index;
      if (key.empty() || !by_key.count(key)) return corrupt("Sample " + prefix + " lacks input '" + leaf.semantic_path + "'");
      s.inputs[leaf.name] = by_key[key];
    }
    if (skel.contains("reference_output")) {
      std::vector<std::pair<json, std::string>> outs;
      steps.clear();
      walk(skel["reference_output"], steps, outs);
      size_t o_index = 0;
      for (const LeafInfo& leaf : g->outputs) {
        if (!leaf.is_tensor) continue;
        std::string key;
        for (const auto& [path, k] : outs) {
          const std::string disp = path.is_array() && path.empty() ? "()" : semantic_display(path.is_string() ? json{{"tuple", {path}}} : path);
          if (disp == leaf.semantic_path || semantic_display(path) == leaf.semantic_path) key = k;
        }
        if (key.empty() && o_index < outs.size()) key = outs[o_index].second;
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
