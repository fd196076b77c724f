#include "dispatcher.h"

#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include "errors.h"
#include "py_callable_runner.h"

namespace aitune::python {
namespace {

struct Scratch {
  std::vector<BoundArg> bound;
  FlatCall flat;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Drops the scratch's Python references on every exit from a call, errors included. A
// reference left in a thread_local would be released by the thread's C++ destructors, which
// run without the GIL (at thread exit or after interpreter finalisation) and abort the process.
struct ScratchReset {
  Scratch& s;
  ~ScratchReset() {
    s.bound.clear();
    s.flat.clear();
  }
};

}  // namespace

Dispatcher::Dispatcher(Signature signature, bool strict, int llm_param, std::string module_name,
                       py::object on_miss, py::object equal, py::object on_outside)
    : signature_(std::move(signature)),
      module_name_(std::move(module_name)),
      on_miss_(std::move(on_miss)),
      equal_(std::move(equal)),
      on_outside_(std::move(on_outside)) {
  options_.strict = strict;
  options_.llm_param = llm_param;
}

void Dispatcher::add_graph(const GraphKey& key, GraphEntry entry) {
  table_.add(key);
  entries_.push_back(std::move(entry));
}

GraphKey Dispatcher::key_of(const py::tuple& args, const py::dict& kwargs) const {
  std::vector<BoundArg> bound;
  FlatCall flat;
  signature_.bind(args, kwargs, bound);
  flatten_arguments(signature_, bound, options_, flat);
  return flat.key;
}

// True when `entry` fits a call whose key matched: every leaf its rules and checks name exists,
// and the input rules name tensors. A graph restored from a crafted checkpoint can pair a key with
// a spec of another structure; indexing with it would read past the call's leaves.
static bool fits(const GraphEntry& entry, const FlatCall& flat) {
  for (const dispatch::InputRule& rule : entry.dispatch.rules()) {
    if (rule.leaf >= flat.leaves.size() || !flat.leaves[rule.leaf].is_tensor) return false;
  }
  for (const auto& check : entry.eq_checks) {
    if (check.first >= flat.leaves.size()) return false;
  }
  return entry.dispatch.input_order_fits();
}

const GraphEntry* Dispatcher::select(const FlatCall& flat) const {
  for (uint32_t index : table_.find(flat.key)) {
    const GraphEntry& entry = entries_[index];
    if (!fits(entry, flat)) {
      raise_python_error(
          "CorruptCheckpointError",
          "graph '" + entry.dispatch.graph() + "' of module '" + module_name_ +
              "' does not fit the calls its own key matches (its input spec names other leaves): "
              "the checkpoint it was loaded from is inconsistent");
    }
    bool equal = true;
    for (const auto& [leaf, expected] : entry.eq_checks) {
      if (!equal_(flat.leaves[leaf].value, expected).cast<bool>()) {
        equal = false;
        break;
      }
    }
    if (equal) return &entry;
  }
  return nullptr;
}

// The shared input check (docs/reference/dispatch.md#input-check) over this call's leaves; a first
// exit from a recorded envelope goes to the Python on_outside callback.
void Dispatcher::check_inputs(const GraphEntry& entry, const FlatCall& flat) const {
  const std::vector<dispatch::InputRule>& rules = entry.dispatch.rules();
  const Status status = entry.dispatch.check_inputs(
      [&](size_t i) -> const at::Tensor& {
        return THPVariable_Unpack(flat.leaves[rules[i].leaf].value.ptr());
      },
      [&](const dispatch::InputRule& rule, const at::Tensor& tensor) {
        const auto sizes = tensor.sizes();
        on_outside_(entry.dispatch.graph(), rule.path_repr, std::vector<int64_t>(sizes.begin(), sizes.end()),
                    rule.min_shape, rule.max_shape);
      });
  ok_or_throw(status);
}

py::object Dispatcher::run_native(const GraphEntry& entry, const std::vector<at::Tensor>& inputs) const {
  StatusOr<std::vector<at::Tensor>> outputs = internal_error("native runner did not run");
  {
    // Native runners do not need Python; a runner that calls back into Python (a CUDA-graph
    // capture of a Python backend) takes the GIL itself. Releasing it before the runner's
    // mutex keeps the lock order GIL -> mutex impossible (docs/reference/dispatch.md#threads-and-streams).
    py::gil_scoped_release release;
    outputs = entry.dispatch.run(inputs);
  }
  if (!outputs.ok()) {
    // A Python backend served through the CUDA-graph runner raised: re-raise its own exception
    // (type and traceback), as CudaGraphRunner.run does, not a generic AITuneError.
    if (auto raised = PyCallableRunner::take_pending_error()) throw std::move(*raised);
    throw_status(outputs.status());
  }
  if (entry.rebuild.is_none()) {
    if (outputs->size() != 1) {
      raise_python_error("AITuneError", "graph '" + entry.dispatch.graph() + "' of module '" + module_name_ +
                                            "' expected one output tensor from " + entry.dispatch.backend() +
                                            ", got " + std::to_string(outputs->size()));
    }
    return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move((*outputs)[0])));
  }
  py::list result;
  for (auto& tensor : *outputs)
    result.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(tensor))));
  return entry.rebuild(result);
}

py::object Dispatcher::call(const py::tuple& args, const py::dict& kwargs) const {
  Scratch& s = scratch();
  const GraphEntry* entry = nullptr;
  std::vector<at::Tensor> native_inputs;
  {
    ScratchReset reset{s};  // also when binding, flattening, == or the dtype check throws
    signature_.bind(args, kwargs, s.bound);
    flatten_arguments(signature_, s.bound, options_, s.flat);
    entry = select(s.flat);
    if (entry != nullptr) {
      check_inputs(*entry, s.flat);
      if (entry->dispatch.runner()) {
        const std::vector<dispatch::InputRule>& rules = entry->dispatch.rules();
        native_inputs = entry->dispatch.runner_inputs([&](size_t i) -> const at::Tensor& {
          return THPVariable_Unpack(s.flat.leaves[rules[i].leaf].value.ptr());
        });
      }
    }
  }
  if (entry != nullptr && entry->dispatch.runner()) return run_native(*entry, native_inputs);
  // The scratch is released before running: the runner or the miss handler may re-enter
  // (nested tuned modules) and reuse this thread's scratch.
  if (entry == nullptr) return on_miss_(*args, **kwargs);
  PyObject* result = PyObject_Call(entry->runner.ptr(), args.ptr(), kwargs.ptr());
  if (result == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

}  // namespace aitune::python
