#include "py_callable_runner.h"

#include <torch/csrc/autograd/python_variable.h>

#include <memory>

namespace aitune::python {
namespace py = pybind11;
namespace {

// One pending exception per thread. Freeing it touches Python objects, so a thread that exits
// after the interpreter is gone leaks it instead (error_already_set takes the GIL to free).
struct PendingError {
  std::unique_ptr<py::error_already_set> error;
  ~PendingError() {
    if (error && !Py_IsInitialized()) (void)error.release();
  }
};

PendingError& pending() {
  thread_local PendingError p;
  return p;
}

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__qualname__")); }

StatusOr<std::vector<at::Tensor>> tensors_from(py::handle result, const std::string& name) {
  if (THPVariable_Check(result.ptr())) return std::vector<at::Tensor>{THPVariable_Unpack(result.ptr())};
  if (py::isinstance<py::list>(result) || py::isinstance<py::tuple>(result)) {
    std::vector<at::Tensor> out;
    out.reserve(py::len(result));
    size_t index = 0;
    for (py::handle item : result) {
      if (!THPVariable_Check(item.ptr())) {
        return Status(StatusCode::kBackendError, "output of Python runner '" + name +
                                                     "' is not a tensor at index " + std::to_string(index) +
                                                     "; expected torch.Tensor, got " + type_name(item));
      }
      out.push_back(THPVariable_Unpack(item.ptr()));
      ++index;
    }
    return out;
  }
  return Status(StatusCode::kBackendError,
                "output of Python runner '" + name +
                    "' has the wrong type; expected a tensor or a list/tuple of tensors, got " +
                    type_name(result));
}

}  // namespace

PyCallableRunner::PyCallableRunner(py::object fn, std::string name)
    : fn_(std::move(fn)), name_(std::move(name)) {
  if (name_.empty()) {
    py::object qualname = py::getattr(fn_, "__qualname__", py::none());
    name_ = qualname.is_none() ? type_name(fn_) : py::str(qualname).cast<std::string>();
  }
}

PyCallableRunner::~PyCallableRunner() {
  if (!Py_IsInitialized()) {
    (void)fn_.release();  // the interpreter is gone; leak rather than touch it
    return;
  }
  py::gil_scoped_acquire gil;
  fn_ = py::object();
}

std::string PyCallableRunner::describe() const { return "PyCallableRunner(" + name_ + ")"; }

std::optional<py::error_already_set> PyCallableRunner::take_pending_error() {
  PendingError& p = pending();
  if (!p.error) return std::nullopt;
  std::optional<py::error_already_set> out(std::move(*p.error));
  p.error.reset();
  return out;
}

StatusOr<std::vector<at::Tensor>> PyCallableRunner::run(const std::vector<at::Tensor>& inputs) {
  py::gil_scoped_acquire gil;
  pending().error.reset();
  try {
    py::tuple args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      PyObject* wrapped = THPVariable_Wrap(inputs[i]);
      if (wrapped == nullptr) throw py::error_already_set();
      PyTuple_SET_ITEM(args.ptr(), static_cast<Py_ssize_t>(i), wrapped);  // steals the reference
    }
    py::object result = py::reinterpret_steal<py::object>(PyObject_Call(fn_.ptr(), args.ptr(), nullptr));
    if (!result) throw py::error_already_set();
    return tensors_from(result, name_);
  } catch (py::error_already_set& e) {
    std::string message = "Python runner '" + name_ + "' raised " + e.what();
    pending().error = std::make_unique<py::error_already_set>(std::move(e));
    return Status(StatusCode::kBackendError, std::move(message));
  } catch (const std::exception& e) {
    return Status(StatusCode::kBackendError, "Python runner '" + name_ + "' failed: " + e.what());
  }
}

}  // namespace aitune::python
