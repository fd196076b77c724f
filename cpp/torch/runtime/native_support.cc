#include "runtime/native_support.h"

namespace aitune {

std::string native_unsupported_reason(const std::string& where, const std::string& backend_name,
                                      bool native_flag, bool has_package, bool has_tensorrt_plan) {
  if (!native_flag)
    return where + " uses " + backend_name +
           ", which needs Python (only AOT backends run in the C++ runtime)";
  if (has_tensorrt_plan) {
    return where + " uses " + backend_name +
           ": running a TensorRT plan from C++ needs aitune built with TensorRT, and this build has no "
           "TensorRT "
           "support; serve this checkpoint from Python (aitune.torch.load) with the tensorrt package "
           "installed";
  }
  if (!has_package) {
    return where + " uses " + backend_name +
           ", whose artifact this C++ runtime cannot serve yet (only AOTInductor packages)";
  }
  return "";
}

}  // namespace aitune
