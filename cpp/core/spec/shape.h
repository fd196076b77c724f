// Shapes and their printed form. Shapes print as Python lists ("[1, 3, 224, 224]") because
// users compare them with what torch prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aitune {

using Shape = std::vector<int64_t>;

// "[1, 3, 224, 224]"; "[]" for a scalar.
std::string format_shape(const Shape& shape);

}  // namespace aitune
