#include "runtime/runner_registry.h"

#include <mutex>

#include "runners/aoti_runner.h"

namespace aitune {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, RunnerFactory> factories;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: runners may be loaded during static destruction
    reg->factories["aoti_package"] = [](const std::string& path, int device_index) -> StatusOr<LoadedRunner> {
      AITUNE_ASSIGN_OR_RETURN(std::unique_ptr<AotiRunner> runner, AotiRunner::load(path, device_index));
      const int device = runner->is_cuda() ? runner->device_index() : -1;
      return LoadedRunner{std::shared_ptr<Runner>(std::move(runner)), device};
    };
    return reg;
  }();
  return *r;
}

}  // namespace

std::string artifact_kind(const std::string& artifact_key) {
  static const std::map<std::string, std::string> kinds = {{"package", "aoti_package"},
                                                           {"plan", "tensorrt_plan"},
                                                           {"model", "onnx_model"},
                                                           {"exported_model", "torch_tensorrt_program"}};
  const auto it = kinds.find(artifact_key);
  return it == kinds.end() ? artifact_key : it->second;
}

void register_runner_kind(const std::string& kind, RunnerFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[kind] = std::move(factory);
}

void unregister_runner_kind(const std::string& kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories.erase(kind);
}

std::optional<RunnerFactory> find_runner_factory(const std::string& kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto it = r.factories.find(kind);
  if (it == r.factories.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> registered_runner_kinds() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [kind, factory] : r.factories) out.push_back(kind);
  return out;
}

std::optional<std::string> runnable_artifact(const std::map<std::string, std::string>& artifacts) {
  for (const auto& [key, entry] : artifacts) {
    if (find_runner_factory(artifact_kind(key))) return key;
  }
  return std::nullopt;
}

}  // namespace aitune
