// The per-call dispatcher of a tuned module (docs/reference/dispatch.md#per-call-pipeline): bind, flatten,
// key, look up the graph, check input dtypes, run the graph's runner. Entered once per call from the module's
// forward router. The input check and the native run are the shared dispatch core's
// (cpp/torch/dispatch/graph_dispatch.h); this file keeps what needs Python: flattening Python objects and
// the callbacks (miss, ==, outside the envelope). Immutable after activation, so concurrent calls need
// no lock: each thread uses its own scratch buffers.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/graph_dispatch.h"
#include "flatten.h"
#include "signature.h"
#include "spec/graph_table.h"

namespace aitune::python {

namespace py = pybind11;

// One graph of the module: the shared dispatch record (input rules and their messages, native
// runner, input order) plus what only Python has: the backend's callable, the output rebuild and
// the constants confirmed with ==. One record per graph, indexed like the dispatcher's table.
struct GraphEntry {
  dispatch::GraphDispatch dispatch;
  // Called with the original (args, kwargs) when `dispatch` has no native runner. With one, the
  // runner takes the tensor leaves that `dispatch.input_order()` picks and returns output tensors
  // that `rebuild(list)` turns into the output object (None: the output is the single tensor).
  py::object runner;
  py::object rebuild;
  std::vector<std::pair<size_t, py::object>> eq_checks;  // constants confirmed with ==
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
  const std::string& module_name() const { return module_name_; }

 private:
  const GraphEntry* select(const FlatCall& flat) const;
  void check_inputs(const GraphEntry& entry, const FlatCall& flat) const;
  py::object run_native(const GraphEntry& entry, const std::vector<at::Tensor>& inputs) const;

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
