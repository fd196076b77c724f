// The checkpoint manifest as typed structs (docs/reference/checkpoint.md#layout-and-manifest): the one
// parser of manifest.json for the C++ runtime and the CLI. read_manifest runs the schema check
// (manifest_schema.h) first, so every field read here has the type and range the schema
// guarantees; nothing in these structs is a JSON library type (parts kept verbatim for display or
// for a later, narrower parse are JSON text).
//
// Errors: those of parse_manifest (kCorrupt, kUnsupported); nothing else can fail once it passed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "checkpoint/fingerprint.h"
#include "checkpoint/zip_archive.h"
#include "common/status.h"

namespace aitune {

// A constant input's recorded scalar: null, bool, int, float or string.
using ManifestScalar = std::variant<std::monostate, bool, int64_t, double, std::string>;

// One leaf of an input or output spec (docs/reference/recording.md#binding-flattening-and-names).
struct ManifestLeaf {
  std::string semantic_path;  // display form: "x" or "('options', 'mask')"
  std::string access_path;    // `options["mask"]`
  std::string name;           // tensor name `input_options_mask`; empty for constants
  bool is_tensor = true;
  std::vector<std::string> shape;  // per axis: a number or a dynamic-axis name ("batch0")
  std::vector<std::string> axis_kinds;
  std::vector<int64_t> min_shape;
  std::vector<int64_t> max_shape;
  std::string dtype;  // "float32"
  // Constants: the recorded skeleton node as JSON text, and its scalar when the node is
  // {"value": <scalar>} (nullopt for any other node, which no call's value equals).
  std::string value_json;
  std::optional<ManifestScalar> scalar;
};

struct ManifestProfile {
  bool bounded = true;  // false: no range saved for this input (any shape goes)
  std::vector<int64_t> min;
  std::vector<std::optional<int64_t>> max;  // nullopt: unbounded
};

struct ManifestBackend {
  std::string name;             // stable name (backend_names.h); for format 1, mapped from class_path
  std::string class_path;       // format 1 only: the Python class path it stored
  std::string config_json;      // the backend's config object, JSON text
  std::string precision_class;  // as stored ("fp32", "tf32", ...)
  bool has_tf32 = false;        // the entry records torch's TF32 switches ("tf32" key)
  bool is_jit = false;
  bool native = false;                           // the writer's flag: has artifacts and is not JIT
  bool use_cuda_graphs = false;                  // config.use_cuda_graphs
  std::string device;                            // "cpu", "cuda:0"; empty when null
  std::vector<std::string> requires_;            // fingerprint fields its artifact depends on
  std::map<std::string, std::string> artifacts;  // key ("package", "plan", ...) -> entry path
  std::vector<int> input_order;                  // empty when null
  std::vector<std::string> output_paths;         // empty when null
  std::vector<ManifestProfile> profiles;         // empty when null
};

struct ManifestGraph {
  std::string name;
  std::vector<ManifestLeaf> inputs;
  std::vector<ManifestLeaf> outputs;
  ManifestBackend backend;
  std::vector<std::string> samples;  // entry prefixes
  std::string correctness_json;      // empty when absent
};

struct ManifestModule {
  std::string name;
  std::string class_name;  // the user's module type (display only)
  std::string fallback_policy;
  std::vector<std::string> forward_params;  // forward_signature names, in order
  std::vector<ManifestGraph> graphs;
};

struct Manifest {
  int format_version = 0;
  std::string aitune_version;
  std::string created_at;
  Fingerprint fingerprint;       // numbers as their JSON text
  std::string fingerprint_json;  // the saved object verbatim, for display
  std::vector<ManifestModule> modules;
  std::vector<FileRecord> files;
};

// Schema check, then the typed manifest.
StatusOr<Manifest> read_manifest(std::string_view text);

}  // namespace aitune
