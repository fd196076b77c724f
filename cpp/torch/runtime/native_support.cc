#include "runtime/native_support.h"

#include <set>

#include "runtime/runner_registry.h"

namespace aitune {

std::string native_unsupported_reason(const std::string& where, const std::string& backend_name,
                                      bool native_flag, const std::map<std::string, std::string>& artifacts) {
  if (!native_flag)
    return where + " uses " + backend_name +
           ", which needs Python (only AOT backends run in the C++ runtime)";
  if (runnable_artifact(artifacts)) return "";
  if (artifacts.count("plan")) {
    return where + " uses " + backend_name +
           ": running a TensorRT plan from C++ needs aitune built with TensorRT, and this build has no "
           "TensorRT "
           "support; serve this checkpoint from Python (aitune.torch.load) with the tensorrt package "
           "installed";
  }
  std::set<std::string> kinds;
  for (const auto& [key, entry] : artifacts) kinds.insert(artifact_kind(key));
  std::string saved, registered;
  for (const std::string& k : kinds) saved += (saved.empty() ? "" : ", ") + k;
  for (const std::string& k : registered_runner_kinds()) registered += (registered.empty() ? "" : ", ") + k;
  return where + " uses " + backend_name + ", whose artifact" + (kinds.size() == 1 ? " kind " : " kinds ") +
         (saved.empty() ? "(none)" : saved) + (kinds.size() == 1 ? " has" : " have") +
         " no runner in this C++ runtime (runners are registered for: " +
         (registered.empty() ? "nothing" : registered) + ")";
}

}  // namespace aitune
