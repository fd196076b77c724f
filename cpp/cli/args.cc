// Command-line parsing and the exit-code mapping shared by the `aitune` commands
// (docs/reference/native.md#command-line).
#include "args.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <limits>

#include "runtime/safetensors_io.h"

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
  std::cerr << "aitune " << command << ": " << aitune::status_code_name(s.code()) << ": " << s.message()
            << "\n";
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
    auto is = [&](const std::vector<std::string>& v) {
      return std::find(v.begin(), v.end(), arg) != v.end();
    };
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
  if (!a.values.count("--device") || device < 0)
    return aitune::Status::Ok();  // default: where the graph was built
  const std::string asked = a.values.at("--device");
  const int count = at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0;
  if (device >= count) {
    return {aitune::StatusCode::kIncompatible,
            "--device " + asked + ": this machine has " +
                (count == 0 ? std::string("no CUDA device") : std::to_string(count) + " CUDA device(s)")};
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
