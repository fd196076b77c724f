// The checkpoint manifest as typed structs (docs/reference/checkpoint.md#layout-and-manifest): the one
// reader of manifest.json, for the C++ runtime, the CLI and, through `_C.read_manifest`, Python's
// ait.load and results store (docs/design.md#the-checkpoint). read_manifest runs the schema check
// (manifest_schema.h) first, so every field read here has the type and range the schema
// guarantees; nothing in these structs is a JSON library type: free-form parts (a backend's config
// and state, a constant's recorded node, a weights index, dynamic shapes, ...) are kept as JSON
// text, which each reader decodes where it needs them.
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

// A leaf's semantic path as stored: one step ("x", 0) or, when `is_tuple`, a tuple of steps
// ({"tuple": ["options", "mask"]}).
struct ManifestSemanticPath {
  bool is_tuple = false;
  std::vector<std::variant<int64_t, std::string>> steps;
};

// One leaf of an input or output spec (docs/reference/recording.md#binding-flattening-and-names).
struct ManifestLeaf {
  std::string semantic_path;  // display form: "x" or "('options', 'mask')"
  ManifestSemanticPath semantic_steps;
  std::string access_path;  // `options["mask"]`
  std::string name;         // tensor name `input_options_mask`; empty for constants
  bool is_tensor = true;
  std::vector<std::string> shape;  // per axis: a number or a dynamic-axis name ("batch0")
  std::vector<std::string> axis_kinds;
  std::vector<int64_t> min_shape;
  std::vector<int64_t> max_shape;
  std::vector<std::optional<double>> multipliers;  // per axis; nullopt where the file holds null
  std::string dtype;                               // "float32"
  std::vector<std::string> dtypes;                 // every dtype seen at this leaf
  // Constants: the recorded skeleton node as JSON text, and its scalar when the node is
  // {"value": <scalar>} (nullopt for any other node, which no call's value equals).
  std::string value_json;
  std::optional<ManifestScalar> scalar;
  bool needs_eq = false;  // the dispatcher compares the value (false when the file omits it)
};

struct ManifestProfile {
  bool bounded = true;  // false: no range saved for this input (any shape goes)
  std::vector<int64_t> min;
  std::vector<std::optional<int64_t>> max;  // nullopt: unbounded
};

// `modules[].graphs[].backend`. Checked, read and listed for Python (backend_fields()) in
// manifest_backend.{h,cc}: a new field goes here, there, and into checkpoint/entry_writer.py.
struct ManifestBackend {
  std::string name;             // stable name (backend_names.h); for format 1, mapped from class_path
  std::string class_path;       // format 1 only: the Python class path it stored
  std::string config_json;      // the backend's config object, JSON text
  std::string extra_json;       // the backend's other to_dict() fields, JSON text ("{}" when absent)
  std::string precision_class;  // as stored ("fp32", "tf32", ...)
  bool has_tf32 = false;        // the entry records torch's TF32 switches ("tf32" key)
  std::string tf32_json;        // those switches, JSON text ("null" when absent)
  bool is_jit = false;
  bool native = false;  // the writer's flag: has artifacts and is not JIT
  // Whether the backend serves through the CUDA-graph runner: `config.use_cuda_graphs`, the switch
  // the backend's own config is restored with, so Python and the C++ runtime serve alike. The
  // writer also stores it as `runtime.use_cuda_graphs` (for earlier readers); that copy is not read
  // (docs/reference/checkpoint.md#layout-and-manifest).
  bool use_cuda_graphs = false;
  std::string device;                                    // "cpu", "cuda:0"; empty when null
  std::vector<std::string> requires_;                    // fingerprint fields its artifact depends on
  std::map<std::string, std::string> artifacts;          // key ("package", "plan", ...) -> entry path
  std::optional<std::vector<int>> input_order;           // nullopt when null
  std::optional<std::vector<std::string>> output_paths;  // nullopt when null
  std::optional<std::vector<ManifestProfile>> profiles;  // nullopt when null
  // AITune-contract backends (docs/reference/backends.md): their to_dict() state.
  bool own_state = false;
  std::string state_json = "null";           // the encoded state, JSON text
  std::optional<std::string> state_tensors;  // entry holding the state's tensors
};

struct ManifestGraph {
  std::string name;
  std::vector<uint64_t> key_tokens;      // the graph key (docs/reference/recording.md)
  std::optional<std::string> llm_phase;  // "prefill", "decode"; nullopt when null or absent
  std::vector<ManifestLeaf> inputs;
  std::vector<ManifestLeaf> outputs;
  ManifestBackend backend;
  std::vector<std::string> samples;  // entry prefixes
  std::string correctness_json;      // empty when absent
};

// One forward_signature entry: a parameter of the module's forward.
struct ManifestParam {
  std::string name;
  std::string kind;  // "POSITIONAL_ONLY", ..., "VAR_KEYWORD" (inspect.Parameter kinds)
  bool has_default = false;
};

struct ManifestModule {
  std::string name;
  std::string prefix;      // where it sits in the saved object ("" for the object itself)
  std::string class_name;  // the user's module type (display only)
  bool strict_mode = true;
  std::string fallback_policy;
  std::string weights_json = "null";  // {entry, aliases, extra_state} or null, JSON text
  std::vector<ManifestParam> forward_signature;
  std::string dynamic_shapes_json = "null";  // as recorded, JSON text ("null" when absent)
  std::vector<ManifestGraph> graphs;
};

// What the saved object was: the module itself or a pipeline holding modules.
struct ManifestRoot {
  std::string kind;                   // "module" or "pipeline"
  std::string class_name;             // display only
  std::string weights_json = "null";  // weights outside the tuned modules, JSON text
};

struct Manifest {
  int format_version = 0;
  std::optional<std::string> kind;         // "aitune.results" for a results-store file
  std::optional<std::string> results_key;  // a results-store file's key
  std::string aitune_version;
  std::string created_at;
  Fingerprint fingerprint;       // numbers as their JSON text
  std::string fingerprint_json;  // the saved object verbatim, for display
  ManifestRoot root;
  std::vector<ManifestModule> modules;
  std::vector<FileRecord> files;
  std::map<std::string, std::string> sha512;  // entry -> hex digest; empty unless saved with SHA-512
};

// Schema check, then the typed manifest.
StatusOr<Manifest> read_manifest(std::string_view text);

// A graph spec alone, as checkpoint/graphs.py graph_to_json writes it (name, llm_phase,
// key_tokens, input_spec, output_spec; no backend or samples), after the same checks the manifest
// schema makes of those fields: how a worker process reads the graph a tuning process sent.
StatusOr<ManifestGraph> read_graph_spec(std::string_view text);

}  // namespace aitune
