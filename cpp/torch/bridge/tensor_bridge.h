// Tensor bridge: at::Tensor <-> the torch-free specs of cpp/core.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "spec/shape.h"
#include "spec/tensor_spec.h"

namespace aitune {

Shape shape_of(const at::Tensor& tensor);

// Short dtype names as torch prints them after "torch.": "float32", "bfloat16", "int64", "bool".
std::string dtype_name(c10::ScalarType type);
StatusOr<c10::ScalarType> dtype_from_name(std::string_view name);

// First sample of a leaf (see TensorSpec::from_sample).
TensorSpec spec_from_tensor(const at::Tensor& tensor, std::optional<int64_t> batch_size);

}  // namespace aitune
