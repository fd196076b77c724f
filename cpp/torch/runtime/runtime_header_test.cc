// The public runtime header names no third-party type but torch's (docs/reference/native.md#runtime-api):
// this file includes only it, so a header that pulls nlohmann/json.hpp back in fails to compile.
#include <aitune/runtime.h>
#include <gtest/gtest.h>

#include <type_traits>

#ifdef NLOHMANN_JSON_VERSION_MAJOR
#error "aitune/runtime.h must not include nlohmann/json.hpp"
#endif

namespace aitune {
namespace {

TEST(RuntimeHeader, ManifestAndFingerprintAreOwnTypes) {
  static_assert(std::is_same_v<decltype(std::declval<const Runtime&>().manifest()), const Manifest&>);
  static_assert(std::is_same_v<decltype(current_fingerprint(0)), Fingerprint>);
  static_assert(std::is_same_v<decltype(GraphInfo{}.backend_config_json), std::string>);
  SUCCEED();
}

}  // namespace
}  // namespace aitune
