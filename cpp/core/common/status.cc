#include "common/status.h"

namespace aitune {

const char* status_code_name(StatusCode code) {
  // No default case: -Wswitch flags a code added to the enum but not named here.
  switch (code) {
    case StatusCode::kOk: return "Ok";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kGraphNotFound: return "GraphNotFound";
    case StatusCode::kProfileShape: return "ProfileShape";
    case StatusCode::kCorrupt: return "Corrupt";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kIncompatible: return "Incompatible";
    case StatusCode::kBackendUnavailable: return "BackendUnavailable";
    case StatusCode::kBackendError: return "BackendError";
    case StatusCode::kCudaError: return "CudaError";
    case StatusCode::kInternal: return "Internal";
  }
  // Only reachable through a cast of an out-of-range integer (e.g. a corrupt saved code).
  return "Unknown";
}

std::string Status::to_string() const {
  std::string text = status_code_name(code_);
  if (!message_.empty()) {
    text += ": ";
    text += message_;
  }
  return text;
}

}  // namespace aitune
