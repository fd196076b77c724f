// The `aitune` command line (SPEC §11.2): doctor, inspect, run and bench over checkpoints.
// Exit codes: 0 ok; 1 runtime/backend error; 2 usage; 3 corrupt or unsupported checkpoint;
// 4 incompatible environment; 5 graph not runnable natively; 6 numeric check failed;
// 7 input outside profile or unknown graph.
#include <ATen/ATen.h>

#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/zip_archive.h"
#include "env/environment.h"
#include "measure/measure_loop.h"
#include "measure/call_timer.h"
#include "runtime/runtime.h"
#include "runtime/safetensors_io.h"
#include "select/tolerance.h"
#include "validate/compare.h"

namespace {

using json = nlohmann::json;

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCorrupt = 3;
constexpr int kExitIncompatible = 4;
constexpr int kExitNotNative = 5;
constexpr int kExitNumeric = 6;
constexpr int kExitInput = 7;

int usage(std::ostream& out, int code) {
  out << "usage: aitune <command> [options]\n"
         "\n"
         "commands:\n"
         "  doctor [--json]   show the torch build, CUDA driver, GPUs and optional libraries aitune can use\n"
         "  inspect <ckpt> [--json] [--verify fast|full]\n"
         "                    modules, graphs, specs, backends, files, fingerprint and per-graph verdicts\n"
         "  run <ckpt> [--module M] [--graph G] [--inputs FILE.safetensors] [--outputs FILE.safetensors]\n"
         "             [--check] [--device N|cpu] [--cuda-graphs on|off|auto]\n"
         "                    one run (default inputs: the graph's stored sample 0)\n"
         "  bench <ckpt> [--module M] [--graph G] [--batch-size N] [--warmup 10] [--iterations 20]\n"
         "               [--device N|cpu] [--cuda-graphs on|off|auto] [--json]\n"
         "                    latency and throughput on the stored sample 0 (re-batched with --batch-size)\n";
  return code;
}

int exit_code(const aitune::Status& s) {
  using aitune::StatusCode;
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kCorrupt:
    case StatusCode::kUnsupported: return kExitCorrupt;
    case StatusCode::kIncompatible: return kExitIncompatible;
    case StatusCode::kBackendUnavailable: return kExitNotNative;
    case StatusCode::kProfileShape:
    case StatusCode::kGraphNotFound: return kExitInput;
    case StatusCode::kInvalidArgument: return kExitUsage;
    default: return kExitError;
  }
}

int fail(const std::string& command, const aitune::Status& s) {
  std::cerr << "aitune " << command << ": " << aitune::status_code_name(s.code()) << ": " << s.message() << "\n";
  return exit_code(s);
}

int usage_error(const std::string& command, const std::string& message) {
  std::cerr << "aitune " << command << ": " << message << "\n";
  return kExitUsage;
}

// Parsed options shared by inspect/run/bench.
struct Args {
  std::string ckpt;
  std::map<std::string, std::string> values;  // --flag value
  std::map<std::string, bool> flags;          // --flag
};

// `value_flags` take one argument; `bool_flags` none.
std::optional<Args> parse(const std::string& command, int argc, char** argv, const std::vector<std::string>& value_flags,
                          const std::vector<std::string>& bool_flags) {
  Args a;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    auto is = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), arg) != v.end(); };
    if (is(bool_flags)) {
      a.flags[arg] = true;
    } else if (is(value_flags)) {
      if (i + 1 >= argc) {
        usage_error(command, "option " + arg + " needs a value");
        return std::nullopt;
      }
      a.values[arg] = argv[++i];
    } else if (arg.rfind("--", 0) == 0 || !a.ckpt.empty()) {
      usage_error(command, "unknown argument '" + arg + "'");
      return std::nullopt;
    } else {
      a.ckpt = arg;
    }
  }
  if (a.ckpt.empty()) {
    usage_error(command, "missing checkpoint path");
    return std::nullopt;
  }
  return a;
}

std::optional<int> parse_int(const std::string& s) {
  try {
    size_t pos = 0;
    const long v = std::stol(s, &pos);
    if (pos != s.size()) return std::nullopt;
    return static_cast<int>(v);
  } catch (...) {
    return std::nullopt;
  }
}

// --device N|cpu -> device index (-1: CPU). Default 0.
std::optional<int> parse_device(const Args& a) {
  auto it = a.values.find("--device");
  if (it == a.values.end()) return 0;
  if (it->second == "cpu") return -1;
  if (it->second.rfind("cuda:", 0) == 0) return parse_int(it->second.substr(5));
  return parse_int(it->second);
}

std::string join_shape(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out + "]";
}
std::string join_shape(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

json leaf_json(const aitune::LeafInfo& l) {
  json j = {{"semantic_path", l.semantic_path}, {"access_path", l.access_path}};
  if (!l.is_tensor) {
    j["value"] = l.value;
    return j;
  }
  j["name"] = l.name;
  j["shape"] = l.shape;
  j["axis_kinds"] = l.axis_kinds;
  j["min_shape"] = l.min_shape;
  j["max_shape"] = l.max_shape;
  j["dtype"] = l.dtype;
  return j;
}

void print_leaves(const std::string& title, const std::vector<aitune::LeafInfo>& leaves) {
  std::cout << "      " << title << ":\n";
  std::cout << "        " << std::left << std::setw(24) << "access path" << std::setw(24) << "semantic path" << std::setw(24)
            << "name" << std::setw(20) << "shape" << std::setw(14) << "min" << std::setw(14) << "max"
            << "dtype\n";
  for (const auto& l : leaves) {
    if (!l.is_tensor) {
      std::cout << "        " << std::setw(24) << l.access_path << std::setw(24) << l.semantic_path << "constant "
                << l.value.dump() << "\n";
      continue;
    }
    std::cout << "        " << std::setw(24) << l.access_path << std::setw(24) << l.semantic_path << std::setw(24) << l.name
              << std::setw(20) << join_shape(l.shape) << std::setw(14) << join_shape(l.min_shape) << std::setw(14)
              << join_shape(l.max_shape) << l.dtype << "\n";
  }
}

std::string verdict(const aitune::GraphInfo& g) {
  if (!g.native) return "python-only";
  if (!g.incompatible.empty()) {
    std::string one = g.incompatible;
    for (char& c : one) {
      if (c == '\n') c = ';';
    }
    return "incompatible (" + one + ")";
  }
  return "native";
}

int inspect(int argc, char** argv) {
  auto parsed = parse("inspect", argc, argv, {"--verify", "--device"}, {"--json"});
  if (!parsed) return kExitUsage;
  const Args& a = *parsed;
  const std::string verify = a.values.count("--verify") ? a.values.at("--verify") : "fast";
  if (verify != "fast" && verify != "full") return usage_error("inspect", "--verify takes fast or full");
  const auto device = parse_device(a);
  if (!device) return usage_error("inspect", "--device takes a CUDA index or 'cpu'");
  aitune::LoadOptions options;
  options.device_index = *device;
  options.allow_incompatible = true;
  options.load_runners = false;
  auto rt = aitune::Runtime::load(a.ckpt, options);
  if (!rt.ok()) return fail("inspect", rt.status());
  if (verify == "full") {
    aitune::Status s = (*rt)->verify_all();
    if (!s.ok()) return fail("inspect", s);
  }
  const json& m = (*rt)->manifest();
  json out = {{"path", a.ckpt}, {"format_version", m.value("format_version", json())},
              {"aitune_version", m.value("aitune_version", json())}, {"created_at", m.value("created_at", json())},
              {"fingerprint", (*rt)->fingerprint()}, {"current_fingerprint", aitune::current_fingerprint(*device)},
              {"verified", verify}, {"modules", json::array()}, {"files", json::array()}};
  uint64_t total = 0;
  for (const auto& f : (*rt)->files()) {
    out["files"].push_back({{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}});
    total += f.size;
  }
  const json& mj_list = m.value("modules", json::array());
  for (const std::string& name : (*rt)->modules()) {
    const aitune::ModuleHandle* module = *(*rt)->module(name);
    json mj = {{"name", name}, {"graphs", json::array()}};
    for (const json& raw : mj_list) {
      if (raw.value("name", "") == name) {
        mj["class"] = raw.value("class", json());
        mj["fallback_policy"] = raw.value("fallback_policy", json());
      }
    }
    for (const auto& g : module->graphs()) {
      json gj = {{"name", g.name}, {"backend", g.backend_class}, {"config", g.backend_config},
                 {"precision_class", g.precision_class}, {"device", g.device}, {"native", g.native},
                 {"verdict", verdict(g)}, {"samples", g.samples.size()}, {"inputs", json::array()},
                 {"outputs", json::array()}, {"profiles", json::array()}};
      if (!g.not_native_reason.empty()) gj["not_native_reason"] = g.not_native_reason;
      for (const auto& l : g.inputs) gj["inputs"].push_back(leaf_json(l));
      for (const auto& l : g.outputs) gj["outputs"].push_back(leaf_json(l));
      for (const auto& p : g.profiles) {
        json mx = json::array();
        for (const auto& d : p.max) mx.push_back(d ? json(*d) : json());
        gj["profiles"].push_back({{"min", p.min}, {"max", mx}});
      }
      for (const json& raw : mj_list) {
        if (raw.value("name", "") != name) continue;
        for (const json& rg : raw.value("graphs", json::array())) {
          if (rg.value("name", "") == g.name && rg.contains("correctness")) gj["correctness"] = rg["correctness"];
        }
      }
      mj["graphs"].push_back(gj);
    }
    out["modules"].push_back(mj);
  }
  if (a.flags.count("--json")) {
    std::cout << out.dump(1) << "\n";
    return kExitOk;
  }
  std::cout << "checkpoint: " << a.ckpt << " (" << total << " bytes of entries)\n"
            << "format_version: " << out["format_version"].dump() << ", aitune " << out["aitune_version"].dump()
            << ", created " << out["created_at"].dump() << "\n"
            << "fingerprint: " << (*rt)->fingerprint().dump() << "\n";
  for (const json& mj : out["modules"]) {
    std::cout << "module '" << mj["name"].get<std::string>() << "'";
    if (mj.contains("class")) std::cout << " (" << mj["class"].dump() << ")";
    std::cout << "\n";
    for (const json& gj : mj["graphs"]) {
      std::cout << "  graph '" << gj["name"].get<std::string>() << "': " << gj["verdict"].get<std::string>() << "\n"
                << "    backend: " << gj["backend"].get<std::string>() << " " << gj["config"].dump() << "\n"
                << "    precision class: " << gj["precision_class"].get<std::string>() << ", device: " << gj["device"].dump()
                << ", samples: " << gj["samples"].dump() << "\n";
      if (gj.contains("not_native_reason")) std::cout << "    " << gj["not_native_reason"].get<std::string>() << "\n";
      if (!gj["profiles"].empty()) std::cout << "    profiles: " << gj["profiles"].dump() << "\n";
      if (gj.contains("correctness")) std::cout << "    correctness: " << gj["correctness"].dump() << "\n";
    }
    const aitune::ModuleHandle* module = *(*rt)->module(mj["name"].get<std::string>());
    for (const auto& g : module->graphs()) {
      std::cout << "    graph '" << g.name << "' specs:\n";
      print_leaves("inputs", g.inputs);
      print_leaves("outputs", g.outputs);
    }
  }
  std::cout << "files:\n";
  for (const auto& f : (*rt)->files()) std::cout << "  " << std::setw(12) << std::right << f.size << "  " << f.path << "\n";
  return kExitOk;
}

// Resolves --module (default: the only / first module) and --graph (default: the first graph).
aitune::Status pick(const aitune::Runtime& rt, const Args& a, const aitune::ModuleHandle** module,
                    const aitune::GraphInfo** graph) {
  const auto names = rt.modules();
  if (names.empty()) return aitune::not_found("The checkpoint holds no tuned module");
  std::string name = a.values.count("--module") ? a.values.at("--module") : names.front();
  auto m = rt.module(name);
  if (!m.ok()) return aitune::graph_not_found(m.status().message());
  *module = *m;
  if ((*module)->graphs().empty()) return aitune::graph_not_found("Module '" + name + "' has no graph");
  *graph = &(*module)->graphs().front();
  if (a.values.count("--graph")) {
    *graph = nullptr;
    for (const auto& g : (*module)->graphs()) {
      if (g.name == a.values.at("--graph")) *graph = &g;
    }
    if (*graph == nullptr) return aitune::graph_not_found("Module '" + name + "' has no graph '" + a.values.at("--graph") + "'");
  }
  return aitune::Status::Ok();
}

// --cuda-graphs on|off|auto into `graphs` (auto, the default: as saved with the backend, nullopt).
// False for any other value.
bool parse_cuda_graphs(const Args& a, std::optional<bool>& graphs) {
  graphs.reset();
  const auto it = a.values.find("--cuda-graphs");
  if (it == a.values.end() || it->second == "auto") return true;
  if (it->second != "on" && it->second != "off") return false;
  graphs = it->second == "on";
  return true;
}

aitune::StatusOr<std::unique_ptr<aitune::Runtime>> load_for_run(const Args& a, int device, std::optional<bool> graphs) {
  aitune::LoadOptions options;
  options.device_index = device;
  options.cuda_graphs.enabled = graphs;
  return aitune::Runtime::load(a.ckpt, options);
}

int run(int argc, char** argv) {
  auto parsed =
      parse("run", argc, argv, {"--module", "--graph", "--inputs", "--outputs", "--device", "--cuda-graphs"}, {"--check"});
  if (!parsed) return kExitUsage;
  const Args& a = *parsed;
  const auto device = parse_device(a);
  if (!device) return usage_error("run", "--device takes a CUDA index or 'cpu'");
  std::optional<bool> graphs;
  if (!parse_cuda_graphs(a, graphs)) return usage_error("run", "--cuda-graphs takes on, off or auto, got '" + a.values.at("--cuda-graphs") + "'");
  if (a.flags.count("--check") && a.values.count("--inputs"))
    return usage_error("run", "--check compares with the stored sample's reference output; it cannot be combined with --inputs");
  auto rt = load_for_run(a, *device, graphs);
  if (!rt.ok()) return fail("run", rt.status());
  const aitune::ModuleHandle* module = nullptr;
  const aitune::GraphInfo* graph = nullptr;
  if (aitune::Status s = pick(**rt, a, &module, &graph); !s.ok()) return fail("run", s);
  aitune::Inputs inputs;
  std::optional<aitune::StoredSample> sample;
  if (a.values.count("--inputs")) {
    auto tensors = aitune::read_safetensors_file(a.values.at("--inputs"));
    if (!tensors.ok()) return fail("run", tensors.status().code() == aitune::StatusCode::kNotFound
                                              ? aitune::invalid_argument(tensors.status().message())
                                              : tensors.status());
    for (auto& [name, t] : *tensors) inputs[name] = t;
  } else {
    if (!graph->native) return fail("run", aitune::Status(aitune::StatusCode::kBackendUnavailable, graph->not_native_reason));
    auto s = module->sample(graph->name, 0);
    if (!s.ok()) return fail("run", s.status());
    sample = std::move(s).value();
    inputs = sample->inputs;
  }
  auto outputs = (a.values.count("--inputs") && !a.values.count("--graph")) ? module->run(inputs)
                                                                             : module->run_graph(graph->name, inputs);
  if (!outputs.ok()) return fail("run", outputs.status());
  for (const auto& [path, t] : outputs->items) {
    std::cout << path << ": " << t.scalar_type() << " " << t.sizes() << "\n";
  }
  if (a.values.count("--outputs")) {
    aitune::Status s = aitune::write_safetensors_file(a.values.at("--outputs"), outputs->items);
    if (!s.ok()) return fail("run", s);
  }
  if (!a.flags.count("--check")) return kExitOk;
  if (sample->reference.empty())
    return fail("run", aitune::not_found("The stored sample has no reference output; save with include_samples=True"));
  auto precision = aitune::precision_class_from_name(graph->precision_class);
  const aitune::PrecisionClass pc = precision.ok() ? *precision : aitune::PrecisionClass::kFp32;
  const aitune::NumericTolerance tol = aitune::default_tolerance(pc);
  bool all_pass = true;
  for (const auto& [path, reference] : sample->reference) {
    const at::Tensor* candidate = outputs->find(path);
    if (candidate == nullptr) {
      std::cerr << "aitune run: output '" << path << "' is missing from the native outputs\n";
      all_pass = false;
      continue;
    }
    auto metrics = aitune::compare_tensors(*candidate, reference, tol.atol, tol.rtol, pc == aitune::PrecisionClass::kFp32);
    if (!metrics.ok()) return fail("run", metrics.status());
    aitune::LeafMetrics leaf{metrics->max_abs_error, metrics->max_rel_error, metrics->rel_l2_error,
                             metrics->mismatch_fraction, metrics->has_nan, metrics->numel};
    const bool passes = aitune::leaf_passes(leaf, tol);
    std::cout << "check " << path << ": max_abs=" << leaf.max_abs_error << " rel_l2=" << leaf.rel_l2_error
              << " mismatched=" << leaf.mismatch_fraction * 100 << "% (" << aitune::precision_class_name(pc) << ") "
              << (passes ? "passed" : "FAILED") << "\n";
    if (!passes) {
      std::cerr << "aitune run: " << aitune::numeric_failure_message(path, 0, leaf, tol, pc) << "\n";
      all_pass = false;
    }
  }
  return all_pass ? kExitOk : kExitNumeric;
}

// Repeats or slices every axis whose kind is "batch" to `batch` entries.
at::Tensor rebatch(const at::Tensor& t, const aitune::LeafInfo& leaf, int64_t batch) {
  at::Tensor out = t;
  for (size_t d = 0; d < leaf.axis_kinds.size() && static_cast<int64_t>(d) < out.dim(); ++d) {
    if (leaf.axis_kinds[d] != "batch") continue;
    const int64_t n = out.size(d);
    if (n == 0) continue;
    if (n < batch) {
      std::vector<int64_t> reps(out.dim(), 1);
      reps[d] = (batch + n - 1) / n;
      out = out.repeat(reps);
    }
    out = out.narrow(d, 0, batch).contiguous();
  }
  return out;
}

int bench(int argc, char** argv) {
  auto parsed = parse("bench", argc, argv,
                      {"--module", "--graph", "--batch-size", "--warmup", "--iterations", "--device", "--cuda-graphs"},
                      {"--json"});
  if (!parsed) return kExitUsage;
  const Args& a = *parsed;
  const auto device = parse_device(a);
  if (!device) return usage_error("bench", "--device takes a CUDA index or 'cpu'");
  std::optional<bool> graphs;
  if (!parse_cuda_graphs(a, graphs))
    return usage_error("bench", "--cuda-graphs takes on, off or auto, got '" + a.values.at("--cuda-graphs") + "'");
  auto int_flag = [&](const char* name, int fallback) -> std::optional<int> {
    return a.values.count(name) ? parse_int(a.values.at(name)) : std::optional<int>(fallback);
  };
  const auto warmup = int_flag("--warmup", 10), iterations = int_flag("--iterations", 20), batch = int_flag("--batch-size", 0);
  if (!warmup || !iterations || !batch || *warmup < 0 || *iterations <= 0 || *batch < 0)
    return usage_error("bench", "--warmup, --iterations and --batch-size take non-negative integers (iterations > 0)");
  auto rt = load_for_run(a, *device, graphs);
  if (!rt.ok()) return fail("bench", rt.status());
  const aitune::ModuleHandle* module = nullptr;
  const aitune::GraphInfo* graph = nullptr;
  if (aitune::Status s = pick(**rt, a, &module, &graph); !s.ok()) return fail("bench", s);
  if (!graph->native) return fail("bench", aitune::Status(aitune::StatusCode::kBackendUnavailable, graph->not_native_reason));
  auto sample = module->sample(graph->name, 0);
  if (!sample.ok()) return fail("bench", sample.status());
  aitune::Inputs inputs = sample->inputs;
  int64_t batch_size = sample->batch_size > 0 ? sample->batch_size : 1;
  if (*batch > 0) {
    batch_size = *batch;
    for (const auto& leaf : graph->inputs) {
      if (!leaf.is_tensor || !inputs.count(leaf.name)) continue;
      inputs[leaf.name] = rebatch(std::get<at::Tensor>(inputs[leaf.name]), leaf, batch_size);
    }
  }
  std::optional<int> cuda;
  if (graph->device.rfind("cuda", 0) == 0 && *device >= 0) cuda = *device;
  // Moving the inputs once keeps host-to-device copies out of the measured calls.
  if (cuda) {
    for (auto& [name, v] : inputs) {
      if (auto* t = std::get_if<at::Tensor>(&v)) *t = t->to(c10::Device(c10::kCUDA, *cuda));
    }
  }
  aitune::FixedStepsRule rule;
  rule.num_steps = *iterations;
  rule.warmup_samples = *warmup > 0 ? *warmup : 1;
  auto result = aitune::measure_batch(batch_size, rule, [&](size_t) -> aitune::StatusOr<aitune::CallTiming> {
    auto timed = aitune::time_call(
        [&]() -> aitune::Status {
          auto out = module->run_graph(graph->name, inputs);
          return out.ok() ? aitune::Status::Ok() : out.status();
        },
        cuda);
    if (!timed.ok()) return timed.status();
    return aitune::CallTiming{timed->host_ns, timed->device_ms};
  });
  if (!result.ok()) return fail("bench", result.status());
  if (a.flags.count("--json")) {
    json j = json::parse(aitune::to_json(*result));
    j["module"] = module->name();
    j["graph"] = graph->name;
    j["backend"] = graph->backend_class;
    j["device"] = cuda ? "cuda:" + std::to_string(*cuda) : "cpu";
    j["cuda_graphs"] = nullptr;
    if (const auto c = module->cuda_graph_counters(graph->name)) {
      j["cuda_graphs"] = {{"hits", c->hits},           {"misses", c->misses},
                          {"captures", c->captures},   {"evictions", c->evictions},
                          {"capture_failures", c->capture_failures}, {"direct_calls", c->direct_calls}};
    }
    std::cout << j.dump() << "\n";
    return kExitOk;
  }
  const auto& h = result->host_latency_ms;
  std::cout << "module '" << module->name() << "' graph '" << graph->name << "' (" << graph->backend_name << ", "
            << (cuda ? "cuda:" + std::to_string(*cuda) : std::string("cpu")) << "), batch size " << batch_size << "\n"
            << std::fixed << std::setprecision(4) << "host latency ms: mean " << h.mean << ", median " << h.median
            << ", p90 " << h.p90 << ", p99 " << h.p99 << " (" << result->num_measured_calls << " calls after "
            << result->num_warmup_calls << " warmup)\n";
  if (result->device_time_ms) std::cout << "device time ms: median " << result->device_time_ms->median << "\n";
  std::cout << std::setprecision(2) << "throughput: " << result->throughput_per_s << " samples/s\n";
  if (const auto c = module->cuda_graph_counters(graph->name)) {
    std::cout << "CUDA graphs: " << c->hits << " hits, " << c->misses << " misses, " << c->captures << " captures, "
              << c->evictions << " evictions, " << c->capture_failures << " capture failures, " << c->direct_calls
              << " direct calls\n";
  } else {
    std::cout << "CUDA graphs: off\n";
  }
  return kExitOk;
}

int doctor(int argc, char** argv) {
  bool json_out = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json_out = true;
    } else {
      std::cerr << "aitune doctor: unknown option '" << argv[i] << "'; expected --json\n";
      return kExitUsage;
    }
  }
  const aitune::EnvironmentInfo info = aitune::probe_environment();
  std::cout << (json_out ? aitune::to_json(info) + "\n" : aitune::to_text(info));
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(std::cerr, kExitUsage);
  const std::string command = argv[1];
  try {
    if (command == "-h" || command == "--help" || command == "help") return usage(std::cout, kExitOk);
    if (command == "doctor") return doctor(argc - 2, argv + 2);
    if (command == "inspect") return inspect(argc - 2, argv + 2);
    if (command == "run") return run(argc - 2, argv + 2);
    if (command == "bench") return bench(argc - 2, argv + 2);
  } catch (const std::exception& e) {
    std::cerr << "aitune " << command << ": internal error: " << e.what() << "\n";
    return kExitError;
  }
  std::cerr << "aitune: unknown command '" << command << "'\n";
  return usage(std::cerr, kExitUsage);
}
