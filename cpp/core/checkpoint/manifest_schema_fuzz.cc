// libFuzzer target: the manifest reader (read_manifest: nesting check, JSON parse, schema
// validation, then the typed read the runtime and Python use; read_graph_spec, the same for one
// graph on its own; parse_state_manifest, a LocalTorchStorage state dict's) must answer any byte string with
// a Status -- never crash, overflow the stack, hang or read out of bounds. kInternal means the schema let
// through something the typed reader cannot read: the two disagree, which is a bug. Seeds:
// manifests ait.save and LocalTorchStorage.save wrote (`tests/fuzz/checkpoint_fuzz.py --write-seeds DIR`,
// DIR/manifests). Build and run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "checkpoint/manifest.h"
#include "checkpoint/state_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto manifest = aitune::read_manifest(text);
  if (!manifest.ok() && manifest.status().code() == aitune::StatusCode::kInternal) std::abort();
  auto graph = aitune::read_graph_spec(text);
  if (!graph.ok() && graph.status().code() == aitune::StatusCode::kInternal) std::abort();
  auto state = aitune::parse_state_manifest(text);
  if (!state.ok() && state.status().code() == aitune::StatusCode::kInternal) std::abort();
  return 0;
}
