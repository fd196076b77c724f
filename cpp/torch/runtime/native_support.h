// Which saved backends this C++ runtime can serve (SPEC §4.1 table, §11.1). Kept apart from
// runtime.cc so the rule is unit tested without writing a checkpoint.
#pragma once

#include <string>

namespace aitune {

// "" when the graph's artifact runs here; otherwise why not, naming `where` ("graph 'g' of
// module 'm'"). A TensorRT plan (artifact "plan") needs a runtime built with TensorRT, which this
// build is not: the message says so instead of calling the plan an unknown artifact.
std::string native_unsupported_reason(const std::string& where, const std::string& backend_name,
                                      bool native_flag, bool has_package, bool has_tensorrt_plan);

}  // namespace aitune
