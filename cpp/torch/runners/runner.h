// Runner: one call of a built backend for one graph (docs/design.md#one-tuned-call). Inputs are the graph's
// tensor leaves in flattening order; outputs are the output tensor leaves in flattening order
// (the caller rebuilds the output structure). Not thread-safe unless the implementation says
// so; CudaGraphRunner is, through its own mutex (docs/reference/dispatch.md#threads-and-streams).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace aitune {

class Runner {
 public:
  virtual ~Runner() = default;
  virtual StatusOr<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) = 0;
  virtual std::string describe() const = 0;
};

}  // namespace aitune
