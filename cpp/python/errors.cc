#include "errors.h"

#include <pybind11/pybind11.h>

namespace aitune::python {
namespace py = pybind11;

namespace {

// Status code -> exception class in aitune.exceptions (docs/reference/errors.md).
const char* exception_class_for(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return "AITuneUserInputError";
    case StatusCode::kNotFound: return "CheckpointNotFoundError";
    case StatusCode::kGraphNotFound: return "GraphNotFoundError";
    case StatusCode::kProfileShape: return "ProfileShapeError";
    case StatusCode::kCorrupt: return "CorruptCheckpointError";
    case StatusCode::kUnsupported: return "UnsupportedCheckpointError";
    case StatusCode::kIncompatible: return "IncompatibleCheckpointError";
    case StatusCode::kBackendUnavailable: return "BackendUnavailableError";
    case StatusCode::kOk:
    case StatusCode::kBackendError:
    case StatusCode::kCudaError:
    case StatusCode::kInternal: return "AITuneError";
  }
  return "AITuneError";
}

}  // namespace

void raise_python_error(const char* class_name, const std::string& message) {
  py::object cls = py::module_::import("aitune.exceptions").attr(class_name);
  // Messages quote input bytes (e.g. a damaged entry name): undecodable ones become U+FFFD, so
  // the error raised is the one meant, not a UnicodeDecodeError about its own message.
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "replace");
  if (text == nullptr) throw py::error_already_set();
  PyErr_SetObject(cls.ptr(), text);
  Py_DECREF(text);
  throw py::error_already_set();
}

void throw_status(const Status& status) {
  raise_python_error(exception_class_for(status.code()), status.message());
}

}  // namespace aitune::python
