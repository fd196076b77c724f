// libFuzzer target: the manifest reader (read_manifest: nesting check, JSON parse, schema
// validation, then the typed read the runtime and Python use; read_graph_spec, the same for one
// graph on its own) must answer any byte string with a Status --
// never crash, overflow the stack, hang or read out of bounds. kInternal means the schema let
// through something the typed reader cannot read: the two disagree, which is a bug. Seeds: the
// manifests ait.save writes, made when the target runs (tests/fuzz/checkpoint_fuzz.py
// --write-seeds DIR, as ./run test does). Build and run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "checkpoint/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto manifest = aitune::read_manifest(text);
  if (!manifest.ok() && manifest.status().code() == aitune::StatusCode::kInternal) std::abort();
  auto graph = aitune::read_graph_spec(text);
  if (!graph.ok() && graph.status().code() == aitune::StatusCode::kInternal) std::abort();
  return 0;
}
