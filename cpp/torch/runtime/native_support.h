// Which saved backends this C++ runtime can serve (docs/reference/backends.md#common-behaviour table,
// docs/reference/native.md#runtime-api). Kept apart from runtime.cc so the rule is unit tested without
// writing a checkpoint.
#pragma once

#include <map>
#include <string>

namespace aitune {

// "" when the graph's artifact runs here (a registered runner kind, runner_registry.h); otherwise
// why not, naming `where` ("graph 'g' of module 'm'") and the backend's stable name. A TensorRT
// plan (artifact "plan") needs a runtime built with TensorRT, which this build is not: the message
// says so instead of calling the plan an unknown artifact.
std::string native_unsupported_reason(const std::string& where, const std::string& backend_name,
                                      bool native_flag, const std::map<std::string, std::string>& artifacts);

}  // namespace aitune
