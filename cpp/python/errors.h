// The one place where a C++ Status becomes a Python exception (docs/reference/errors.md#native-status-codes).
// Exception classes come from aitune.exceptions, so `except` clauses in user code see the same types
// whether an error starts in C++ or in Python.
#pragma once

#include <string>

#include "common/status.h"

namespace aitune::python {

// Raises the aitune.exceptions class mapped from `status.code()`.
[[noreturn]] void throw_status(const Status& status);

// Raises aitune.exceptions.<class_name>(message).
[[noreturn]] void raise_python_error(const char* class_name, const std::string& message);

// Unwraps a StatusOr or raises.
template <typename T>
T value_or_throw(StatusOr<T> result) {
  if (!result.ok()) throw_status(result.status());
  return std::move(result).value();
}

inline void ok_or_throw(const Status& status) {
  if (!status.ok()) throw_status(status);
}

}  // namespace aitune::python
