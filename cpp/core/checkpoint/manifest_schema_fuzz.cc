// libFuzzer target: the manifest schema (parse_manifest: nesting check, JSON parse, validation)
// must answer any byte string with a Status -- never crash, overflow the stack, hang or read out
// of bounds. Seeds: tests/fuzz/seeds/manifest/ (manifests ait.save wrote). Build and run:
// docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "checkpoint/manifest_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto manifest = aitune::parse_manifest(text);
  if (manifest.ok()) {
    // What the runtime reads next must also be safe on anything the schema let through.
    volatile size_t sink = manifest->at("modules").size() + manifest->at("files").size();
    (void)sink;
  }
  return 0;
}
