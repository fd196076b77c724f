// The `aitune` command line (docs/reference/native.md#command-line): doctor, inspect, run and bench over
// checkpoints. Exit codes: 0 ok; 1 runtime/backend error; 2 usage; 3 corrupt or unsupported checkpoint;
// 4 incompatible environment; 5 graph not runnable natively; 6 numeric check failed;
// 7 input outside profile or unknown graph.
#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iomanip>
#include <limits>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/zip_archive.h"
#include "cli.h"
#include "common/crash_report.h"
#include "env/environment.h"
#include "runtime/runtime.h"
#include "runtime/safetensors_io.h"
#include "select/tolerance.h"
#include "validate/compare.h"

namespace aitune::cli {

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

std::optional<Args> parse(const std::string& command, int argc, char** argv,
                          const std::vector<std::string>& value_flags,
                          const std::vector<std::string>& bool_flags,
                          const std::vector<std::string>& list_flags) {
  Args a;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    auto is = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), arg) != v.end(); };
    if (is(bool_flags)) {
      a.flags[arg] = true;
    } else if (is(value_flags) || is(list_flags)) {
      if (i + 1 >= argc) {
        usage_error(command, "option " + arg + " needs a value");
        return std::nullopt;
      }
      if (is(list_flags)) {
        a.lists[arg].push_back(argv[++i]);
      } else {
        a.values[arg] = argv[++i];
      }
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
  // Decimal digits with an optional '-', within int: 4294967297 must not wrap to 1.
  const size_t digits = s.size() - (!s.empty() && s[0] == '-');
  if (digits == 0 || digits > 10 || !std::all_of(s.end() - static_cast<long>(digits), s.end(), ::isdigit)) {
    return std::nullopt;
  }
  const long long v = std::stoll(s);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) return std::nullopt;
  return static_cast<int>(v);
}

std::optional<int> parse_device(const Args& a) {
  auto it = a.values.find("--device");
  if (it == a.values.end()) return 0;
  if (it->second == "cpu") return -1;
  const std::string index = it->second.rfind("cuda:", 0) == 0 ? it->second.substr(5) : it->second;
  const std::optional<int> v = parse_int(index);
  if (!v || *v < 0 || *v > kMaxCudaIndex) return std::nullopt;
  return v;
}

aitune::Status check_device(const Args& a, int device, const aitune::GraphInfo& graph) {
  if (!a.values.count("--device") || device < 0) return aitune::Status::Ok();  // default: where the graph was built
  const std::string asked = a.values.at("--device");
  const int count = at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0;
  if (device >= count) {
    return {aitune::StatusCode::kIncompatible, "--device " + asked + ": this machine has " +
                                                   (count == 0 ? std::string("no CUDA device") :
                                                                 std::to_string(count) + " CUDA device(s)")};
  }
  if (graph.device.rfind("cuda", 0) != 0) {
    return aitune::invalid_argument("--device " + asked + " asks for a GPU, but graph '" + graph.name +
                                    "' was built for " + (graph.device.empty() ? "the CPU" : graph.device) +
                                    "; run it with --device cpu");
  }
  return aitune::Status::Ok();
}

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
    if (*graph == nullptr)
      return aitune::graph_not_found("Module '" + name + "' has no graph '" + a.values.at("--graph") + "'");
  }
  return aitune::Status::Ok();
}

bool parse_cuda_graphs(const Args& a, std::optional<bool>& graphs) {
  graphs.reset();
  const auto it = a.values.find("--cuda-graphs");
  if (it == a.values.end() || it->second == "auto") return true;
  if (it->second != "on" && it->second != "off") return false;
  graphs = it->second == "on";
  return true;
}

aitune::StatusOr<std::unique_ptr<aitune::Runtime>> load_for_run(const Args& a, int device,
                                                                std::optional<bool> graphs) {
  aitune::LoadOptions options;
  options.device_index = device;
  options.cuda_graphs.enabled = graphs;
  return aitune::Runtime::load(a.ckpt, options);
}

StatusOr<Inputs> read_inputs_file(const std::string& path) {
  auto tensors = read_safetensors_file(path);
  // A bad inputs file is a bad command line (exit 2), not a corrupt checkpoint (exit 3).
  if (!tensors.ok()) return invalid_argument("--inputs " + path + ": " + tensors.status().message());
  Inputs inputs;
  for (auto& [name, t] : *tensors) inputs[name] = t;
  return inputs;
}

}  // namespace aitune::cli

namespace {

using json = nlohmann::json;
using namespace aitune::cli;

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
         "  bench <ckpt> [--module M] [--graph G] [--batch-size N | --shape PATH=D0xD1... ...]\n"
         "               [--inputs FILE.safetensors | --random] [--warmup 10] [--iterations 20]\n"
         "               [--stable-cv R [--max-iterations 100]] [--device N|cpu]\n"
         "               [--cuda-graphs on|off|auto] [--json]\n"
         "                    latency and throughput on the graph's stored sample 0, resized per axis\n"
         "                    (repeated or sliced) to --batch-size on the batch axes, or to each --shape\n"
         "                    (PATH: the input's name input_x, semantic form x or access form);\n"
         "                    --inputs: a file's tensors, keyed as for run --inputs; --random: seeded\n"
         "                    random inputs of the stored sample's shapes (the profile minimum without\n"
         "                    one; --shape and --batch-size apply) and the graph's dtypes: floats randn,\n"
         "                    bool and *mask* integer inputs in [0, 2), other integers in [0, 100);\n"
         "                    --stable-cv R: measure until the CV of the last --iterations calls is <= R\n"
         "                    (0 < R < 1), failing after --max-iterations measured calls\n";
  return code;
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
        if (!p.bounded) {
          gj["profiles"].push_back(json());
          continue;
        }
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
  if (aitune::Status s = check_device(a, *device, *graph); !s.ok()) return fail("run", s);
  aitune::Inputs inputs;
  std::optional<aitune::StoredSample> sample;
  if (a.values.count("--inputs")) {
    auto read = read_inputs_file(a.values.at("--inputs"));
    if (!read.ok()) return fail("run", read.status());
    inputs = std::move(read).value();
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
              << (passes ? "passed" : "FAILED") << " (decided by " << aitune::deciding_bound(leaf, tol) << ")\n";
    if (!passes) {
      std::cerr << "aitune run: " << aitune::numeric_failure_message(path, 0, leaf, tol, pc) << "\n";
      all_pass = false;
    }
  }
  return all_pass ? kExitOk : kExitNumeric;
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
  aitune::install_crash_report();
  const std::string command = argv[1];
  try {
    if (command == "-h" || command == "--help" || command == "help") return usage(std::cout, kExitOk);
    if (command == "doctor") return doctor(argc - 2, argv + 2);
    if (command == "inspect") return inspect(argc - 2, argv + 2);
    if (command == "run") return run(argc - 2, argv + 2);
    if (command == "bench") return aitune::cli::bench(argc - 2, argv + 2);
  } catch (const std::exception& e) {
    std::cerr << "aitune " << command << ": internal error: " << e.what() << "\n";
    return kExitError;
  }
  std::cerr << "aitune: unknown command '" << command << "'\n";
  return usage(std::cerr, kExitUsage);
}
