// Which artifacts the C++ runtime can serve, and how (docs/reference/native.md#runtime-api): a
// registry of runner factories keyed by artifact kind, so the runtime never names a runner class.
// A kind is what a backend entry's artifact key says its file is ("package" -> "aoti_package");
// a graph is native when its backend is not JIT and one of its artifacts has a registered kind.
//
// Thread-safety: registration and lookup take one mutex; register before Runtime::load races.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runners/runner.h"

namespace aitune {

// A runner loaded from an extracted artifact file, and where its inputs must live.
struct LoadedRunner {
  std::shared_ptr<Runner> runner;
  int device_index = -1;  // -1: CPU
};

// Loads the artifact at `artifact_path` for `device_index` (-1: the CPU).
using RunnerFactory =
    std::function<StatusOr<LoadedRunner>(const std::string& artifact_path, int device_index)>;

// The artifact kind of a backend entry's artifact key: "package" -> "aoti_package", "plan" ->
// "tensorrt_plan", "model" -> "onnx_model", "exported_model" -> "torch_tensorrt_program"; any
// other key is its own kind.
std::string artifact_kind(const std::string& artifact_key);

// Registers (or replaces) the factory of `kind`. The built-in "aoti_package" (AotiRunner) is
// registered on first use of the registry.
void register_runner_kind(const std::string& kind, RunnerFactory factory);
// Removes `kind` (tests).
void unregister_runner_kind(const std::string& kind);
// The factory of `kind`; nullopt when none is registered.
std::optional<RunnerFactory> find_runner_factory(const std::string& kind);
// Registered kinds, sorted.
std::vector<std::string> registered_runner_kinds();

// The first artifact of `artifacts` (key -> entry) whose kind has a registered runner: its key;
// nullopt when none has.
std::optional<std::string> runnable_artifact(const std::map<std::string, std::string>& artifacts);

}  // namespace aitune
