#include "bridge/tensor_bridge.h"

#include <array>
#include <utility>

namespace aitune {
namespace {

// The dtypes a graph input can have, named as torch names them (torch.<name>). Keeping our
// own table (instead of c10::toString, which says "Float") makes the manifest and messages
// read like Python.
constexpr std::array<std::pair<c10::ScalarType, const char*>, 17> kDtypeNames = {{
    {c10::ScalarType::Float, "float32"},
    {c10::ScalarType::Double, "float64"},
    {c10::ScalarType::Half, "float16"},
    {c10::ScalarType::BFloat16, "bfloat16"},
    {c10::ScalarType::Float8_e4m3fn, "float8_e4m3fn"},
    {c10::ScalarType::Float8_e5m2, "float8_e5m2"},
    {c10::ScalarType::Byte, "uint8"},
    {c10::ScalarType::Char, "int8"},
    {c10::ScalarType::Short, "int16"},
    {c10::ScalarType::Int, "int32"},
    {c10::ScalarType::Long, "int64"},
    {c10::ScalarType::Bool, "bool"},
    {c10::ScalarType::ComplexHalf, "complex32"},
    {c10::ScalarType::ComplexFloat, "complex64"},
    {c10::ScalarType::ComplexDouble, "complex128"},
    {c10::ScalarType::UInt16, "uint16"},
    {c10::ScalarType::UInt32, "uint32"},
}};

}  // namespace

Shape shape_of(const at::Tensor& tensor) {
  auto sizes = tensor.sizes();
  return Shape(sizes.begin(), sizes.end());
}

std::string dtype_name(c10::ScalarType type) {
  for (const auto& [t, name] : kDtypeNames) {
    if (t == type) return name;
  }
  return std::string(c10::toString(type));
}

StatusOr<c10::ScalarType> dtype_from_name(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  for (const auto& [t, n] : kDtypeNames) {
    if (name == n) return t;
  }
  return invalid_argument("Unknown dtype '" + std::string(name) +
                          "'; expected a torch dtype name such as float32");
}

TensorSpec spec_from_tensor(const at::Tensor& tensor, std::optional<int64_t> batch_size) {
  return TensorSpec::from_sample(shape_of(tensor), dtype_name(tensor.scalar_type()), batch_size);
}

}  // namespace aitune
