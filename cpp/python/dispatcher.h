// The per-call dispatcher of a tuned module (docs/reference/dispatch.md#per-call-pipeline): bind, flatten,
// key, look up the graph, check input dtypes, run the graph's runner. Entered once per call from the module's
// forward router. Immutable after activation, so concurrent calls need no lock: each thread
// uses its own scratch buffers.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "flatten.h"
#include "signature.h"
#include "runners/runner.h"
#include "spec/graph_table.h"

namespace aitune::python {

namespace py = pybind11;

// One tensor input's accepted dtypes and recorded shape envelope, checked before execution
// (docs/reference/dispatch.md#input-check). Eager and JIT backends have no hard shape range: a call outside
// the envelope is allowed and reported once, since it may recompile.
struct InputRule {
  size_t leaf;
  std::vector<int> scalar_types;  // c10::ScalarType values
  std::string path_repr;          // e.g. 'x', for messages
  std::vector<int64_t> min_shape;
  std::vector<int64_t> max_shape;  // INT64_MAX: no upper bound
  // A hard range (AOT backends) rejects calls outside it with ProfileShapeError before any
  // device work; a soft one (eager, JIT) only reports them once.
  bool hard = false;
  std::string tensor_name;               // input_<path>, for messages
  std::string min_text, max_text;        // the profile as the user reads it
  std::shared_ptr<std::atomic<bool>> outside_reported = std::make_shared<std::atomic<bool>>(false);
};

struct GraphEntry {
  std::string name;
  py::object runner;                                    // callable(*args, **kwargs)
  // Native path (AOTInductor, CUDA graphs): the runner takes the graph's tensor leaves, in the
  // order `input_order` gives (indices into the tensor leaves in flattening order), and returns
  // output tensors that `rebuild(list)` turns into the output object. Null: Python runner.
  std::shared_ptr<Runner> native;
  std::vector<size_t> input_order;
  py::object rebuild;                                   // None: the output is the single tensor
  std::string backend_desc;                             // for messages
  std::vector<std::pair<size_t, py::object>> eq_checks;  // constants confirmed with ==
  std::vector<InputRule> input_rules;
};

class Dispatcher {
 public:
  // Python callbacks (policy stays in Python):
  //   on_miss(*args, **kwargs)  a call whose graph is unknown: raises GraphNotFoundError or runs
  //                             the eager fallback;
  //   equal(a, b) -> bool       == for non-builtin constants (numpy arrays, enums, ...);
  //   on_outside(graph, path, shape, min, max)  once per input when a call leaves the
  //                             recorded envelope.
  Dispatcher(Signature signature, bool strict, int llm_param, std::string module_name, py::object on_miss,
             py::object equal, py::object on_outside);

  void add_graph(const GraphKey& key, GraphEntry entry);
  py::object call(const py::tuple& args, const py::dict& kwargs) const;

  // Key of a call without running it (tests and diagnostics).
  GraphKey key_of(const py::tuple& args, const py::dict& kwargs) const;
  size_t num_graphs() const { return entries_.size(); }

 private:
  const GraphEntry* select(const FlatCall& flat) const;
  void check_inputs(const GraphEntry& entry, const FlatCall& flat) const;
  py::object run_native(const GraphEntry& entry, std::vector<at::Tensor> inputs) const;

  Signature signature_;
  FlattenOptions options_;
  std::string module_name_;
  py::object on_miss_;
  py::object equal_;
  py::object on_outside_;
  GraphTable table_;
  std::vector<GraphEntry> entries_;  // indexed like table_
};

}  // namespace aitune::python
