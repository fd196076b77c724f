#include "spec/shape.h"

namespace aitune {

std::string format_shape(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  text += ']';
  return text;
}

}  // namespace aitune
