#include "dispatcher.h"

#include <torch/csrc/autograd/python_variable.h>

#include "bridge/tensor_bridge.h"
#include "errors.h"

namespace aitune::python {
namespace {

std::string torch_dtype_name(int scalar_type) {
  return "torch." + dtype_name(static_cast<c10::ScalarType>(scalar_type));
}

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

Dispatcher::Dispatcher(Signature signature, bool strict, int llm_param, std::string module_name, py::object on_miss)
    : signature_(std::move(signature)), module_name_(std::move(module_name)), on_miss_(std::move(on_miss)) {
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

const GraphEntry* Dispatcher::select(const FlatCall& flat) const {
  for (uint32_t index : table_.find(flat.key)) {
    const GraphEntry& entry = entries_[index];
    bool equal = true;
    for (const auto& [leaf, expected] : entry.eq_checks) {
      int eq = PyObject_RichCompareBool(flat.leaves[leaf].value.ptr(), expected.ptr(), Py_EQ);
      if (eq < 0) {
        PyErr_Clear();  // an == that raises means "not equal" for identity purposes
        eq = 0;
      }
      if (eq == 0) {
        equal = false;
        break;
      }
    }
    if (equal) return &entry;
  }
  return nullptr;
}

void Dispatcher::check_dtypes(const GraphEntry& entry, const FlatCall& flat) const {
  for (const DtypeRule& rule : entry.dtype_rules) {
    const int actual = static_cast<int>(THPVariable_Unpack(flat.leaves[rule.leaf].value.ptr()).scalar_type());
    bool ok = false;
    for (int st : rule.scalar_types) ok = ok || st == actual;
    if (ok) continue;
    std::string expected;
    for (size_t i = 0; i < rule.scalar_types.size(); ++i) {
      expected += (i ? " or " : "") + torch_dtype_name(rule.scalar_types[i]);
    }
    raise_python_error("ProfileShapeError", "Input dtype " + torch_dtype_name(actual) + " does not match tuned dtype " +
                                                expected + " for input " + rule.path_repr + " in module '" +
                                                module_name_ + "', graph '" + entry.name + "'");
  }
}

py::object Dispatcher::call(const py::tuple& args, const py::dict& kwargs) const {
  Scratch& s = scratch();
  const GraphEntry* entry = nullptr;
  {
    ScratchReset reset{s};  // also when binding, flattening, == or the dtype check throws
    signature_.bind(args, kwargs, s.bound);
    flatten_arguments(signature_, s.bound, options_, s.flat);
    entry = select(s.flat);
    if (entry != nullptr) check_dtypes(*entry, s.flat);
  }
  // The scratch is released before running: the runner or the miss handler may re-enter
  // (nested tuned modules) and reuse this thread's scratch.
  if (entry == nullptr) return on_miss_(*args, **kwargs);
  PyObject* result = PyObject_Call(entry->runner.ptr(), args.ptr(), kwargs.ptr());
  if (result == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

}  // namespace aitune::python
