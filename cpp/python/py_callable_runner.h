// PyCallableRunner: a Runner around a Python callable (a Python backend's `infer`), so Python
// backends get the same CUDA-graph runner as native ones (docs/design.md#one-tuned-call).
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "runners/runner.h"

namespace aitune::python {

// Calls `fn(*inputs)` and expects a tensor or a list/tuple of tensors back. run() takes the GIL
// itself, so callers may (and native callers should) release it first. Not thread-safe beyond
// what the GIL gives; CudaGraphRunner serialises its calls.
class PyCallableRunner final : public Runner {
 public:
  // `name` is for messages; empty takes fn's __qualname__. Construct with the GIL held.
  explicit PyCallableRunner(pybind11::object fn, std::string name = {});
  ~PyCallableRunner() override;
  PyCallableRunner(const PyCallableRunner&) = delete;
  PyCallableRunner& operator=(const PyCallableRunner&) = delete;

  // A Python exception from fn becomes kBackendError here; the exception itself is kept for
  // this thread (see take_pending_error) so bindings can re-raise the original type.
  StatusOr<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) override;
  std::string describe() const override;

  // The Python exception of this thread's last failed run, if not taken yet; taking clears it.
  // Call with the GIL held. run() clears a stale one before calling fn.
  static std::optional<pybind11::error_already_set> take_pending_error();

 private:
  pybind11::object fn_;  // released under the GIL in the destructor
  std::string name_;
};

}  // namespace aitune::python
