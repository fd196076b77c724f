// Flattening of Python call arguments and outputs into leaves plus a GraphKey
// (docs/reference/recording.md#binding-flattening-and-names and #graph-identity). One implementation serves
// recording (with paths) and the tuned call path (key and leaves only), so a call is always keyed the same
// way it was recorded.
//
// Built-in containers (tuple/list and subclasses, dict and subclasses) and constants (None,
// bool, int, float, str) are handled here without calling into Python code. Any other type is
// classified once by the Python rule table (aitune.torch.graph.locator): leaf, ignored,
// mapping-like (UserDict), fixed fields (dataclass) or registered user type.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "signature.h"
#include "spec/graph_key.h"

namespace aitune::python {

namespace py = pybind11;

// One step of a leaf's path: a parameter name, a mapping key, a sequence index or an attribute.
struct PathStep {
  char kind;  // 'p' parameter, 'k' key, 'i' index, 'a' attribute
  py::object key;
};

struct Leaf {
  py::object value;
  bool is_tensor = false;
  // Non-builtin constant whose identity the key only summarises by type: the dispatcher
  // confirms it with ==.
  bool needs_eq = false;
};

struct FlatCall {
  GraphKey key;
  std::vector<Leaf> leaves;
  std::vector<std::vector<PathStep>> paths;  // filled only when paths are requested

  void clear() {
    key.clear();
    leaves.clear();
    paths.clear();
  }
};

struct FlattenOptions {
  bool strict = true;       // non-tensor values take part in identity
  bool want_paths = false;  // record each leaf's path (recording), not needed on the call path
  int llm_param = -1;       // index of a `cache_position` parameter: identity is the LLM phase
};

// Flattens bound arguments (from Signature::bind) into `out`.
void flatten_arguments(const Signature& sig, const std::vector<BoundArg>& bound,
                       const FlattenOptions& options, FlatCall& out);

// Flattens a forward's output (root path is the whole output).
void flatten_value(py::handle value, const FlattenOptions& options, FlatCall& out);

// The Python rule table for non-builtin types: a callable (type) -> (rule, fields) where rule
// is 0 leaf, 1 ignore, 2 mapping via `.data`, 3 fields (list of attribute names, fixed per
// type), 4 user type (attribute names per instance from `attrs_fn(obj)`). Setting either clears
// the per-type cache; so does invalidate_type_rules() (after register_user_type/ignore_type).
void set_type_rules(py::object classify_fn, py::object attrs_fn);
void invalidate_type_rules();

// Converts path steps into Python: a tuple of (kind, key) pairs.
py::tuple path_to_python(const std::vector<PathStep>& path);

// Module-exit cleanup of the Python objects the flattener caches.
void clear_type_rules();

// One leaf as Python sees it (`_C.Leaf`): fields by name, so Python never decodes a tuple by position.
struct PyLeaf {
  py::object path;  // tuple of (kind, key) steps
  py::object value;
  bool is_tensor = false;
  bool needs_eq = false;
};

// Registers Leaf, flatten_call, flatten_value and the type-rule setters on `_C`.
void register_flatten_bindings(py::module_& m);

}  // namespace aitune::python
