// `aitune inspect <ckpt>` (docs/reference/native.md#command-line): modules, graphs, specs, backends, files,
// fingerprint and per-graph verdicts of a checkpoint, as text or --json; loads no runner.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.h"

namespace aitune::cli {
namespace {

using json = nlohmann::json;

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
    j["value"] = json::parse(l.value_json);
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
  std::cout << "        " << std::left << std::setw(24) << "access path" << std::setw(24) << "semantic path"
            << std::setw(24) << "name" << std::setw(20) << "shape" << std::setw(14) << "min" << std::setw(14)
            << "max"
            << "dtype\n";
  for (const auto& l : leaves) {
    if (!l.is_tensor) {
      std::cout << "        " << std::setw(24) << l.access_path << std::setw(24) << l.semantic_path
                << "constant " << l.value_json << "\n";
      continue;
    }
    std::cout << "        " << std::setw(24) << l.access_path << std::setw(24) << l.semantic_path
              << std::setw(24) << l.name << std::setw(20) << join_shape(l.shape) << std::setw(14)
              << join_shape(l.min_shape) << std::setw(14) << join_shape(l.max_shape) << l.dtype << "\n";
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

}  // namespace

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
  const aitune::Manifest& m = (*rt)->manifest();
  json current = json::object();
  for (const auto& [field, value] : aitune::current_fingerprint(*device))
    current[field] = value ? json(*value) : json();
  const json saved_fingerprint = json::parse(m.fingerprint_json);
  json out = {{"path", a.ckpt},
              {"format_version", m.format_version},
              {"aitune_version", m.aitune_version},
              {"created_at", m.created_at},
              {"fingerprint", saved_fingerprint},
              {"current_fingerprint", current},
              {"verified", verify},
              {"modules", json::array()},
              {"files", json::array()}};
  uint64_t total = 0;
  for (const auto& f : (*rt)->files()) {
    out["files"].push_back({{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}});
    total += f.size;
  }
  for (const aitune::ManifestModule& saved : m.modules) {
    const aitune::ModuleHandle* module = *(*rt)->module(saved.name);
    json mj = {{"name", saved.name},
               {"graphs", json::array()},
               {"class", saved.class_name},
               {"fallback_policy", saved.fallback_policy}};
    for (size_t i = 0; i < module->graphs().size(); ++i) {
      const aitune::GraphInfo& g = module->graphs()[i];
      json gj = {{"name", g.name},
                 {"backend", g.backend_name},
                 {"config", json::parse(g.backend_config_json)},
                 {"precision_class", g.precision_class},
                 {"device", g.device},
                 {"native", g.native},
                 {"verdict", verdict(g)},
                 {"samples", g.samples.size()},
                 {"inputs", json::array()},
                 {"outputs", json::array()},
                 {"profiles", json::array()}};
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
      const std::string& correctness = saved.graphs[i].correctness_json;
      if (!correctness.empty()) gj["correctness"] = json::parse(correctness);
      mj["graphs"].push_back(gj);
    }
    out["modules"].push_back(mj);
  }
  if (a.flags.count("--json")) {
    std::cout << out.dump(1) << "\n";
    return kExitOk;
  }
  std::cout << "checkpoint: " << a.ckpt << " (" << total << " bytes of entries)\n"
            << "format_version: " << out["format_version"].dump() << ", aitune "
            << out["aitune_version"].dump() << ", created " << out["created_at"].dump() << "\n"
            << "fingerprint: " << saved_fingerprint.dump() << "\n";
  for (const json& mj : out["modules"]) {
    std::cout << "module '" << mj["name"].get<std::string>() << "'";
    if (mj.contains("class")) std::cout << " (" << mj["class"].dump() << ")";
    std::cout << "\n";
    for (const json& gj : mj["graphs"]) {
      std::cout << "  graph '" << gj["name"].get<std::string>() << "': " << gj["verdict"].get<std::string>()
                << "\n"
                << "    backend: " << gj["backend"].get<std::string>() << " " << gj["config"].dump() << "\n"
                << "    precision class: " << gj["precision_class"].get<std::string>()
                << ", device: " << gj["device"].dump() << ", samples: " << gj["samples"].dump() << "\n";
      if (gj.contains("not_native_reason"))
        std::cout << "    " << gj["not_native_reason"].get<std::string>() << "\n";
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
  for (const auto& f : (*rt)->files())
    std::cout << "  " << std::setw(12) << std::right << f.size << "  " << f.path << "\n";
  return kExitOk;
}

}  // namespace aitune::cli
