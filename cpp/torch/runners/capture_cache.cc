#include "runners/capture_cache.h"

#include "bridge/tensor_bridge.h"

namespace aitune {
namespace {

uint64_t hash_tokens(const std::vector<int64_t>& tokens) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the 8 bytes of each token
  for (int64_t token : tokens) {
    auto v = static_cast<uint64_t>(token);
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (v >> (8 * byte)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace

void CaptureKey::add(c10::ScalarType dtype, int device, bool contiguous, c10::IntArrayRef sizes) {
  tokens.push_back(static_cast<int64_t>(dtype));
  tokens.push_back(device);
  tokens.push_back(contiguous ? 1 : 0);
  tokens.push_back(static_cast<int64_t>(sizes.size()));
  for (int64_t size : sizes) tokens.push_back(size);
}

void CaptureKey::finish() { hash = hash_tokens(tokens); }

std::optional<CaptureKey> make_capture_key(const std::vector<at::Tensor>& inputs) {
  if (inputs.empty()) return std::nullopt;
  CaptureKey key;
  key.tokens.reserve(inputs.size() * 8);
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || !t.is_cuda()) return std::nullopt;
    const int index = t.device().index();
    if (key.device_index < 0) {
      key.device_index = index;
    } else if (index != key.device_index) {
      return std::nullopt;
    }
    key.add(t.scalar_type(), index, t.is_contiguous(), t.sizes());
  }
  key.finish();
  return key;
}

// Plain string appends, not an ostringstream: this runs on the capture-failure path in Python
// processes, where an ostream's locale facets crashed once libstdc++ had been promoted to the
// global scope for an AOTInductor package (seen on the GPU image; _C now binds at load, -z now).
std::string describe_capture_key(const CaptureKey& key) {
  std::string out = "(";
  size_t i = 0;
  for (bool first = true; i + 4 <= key.tokens.size(); first = false) {
    const auto dtype = static_cast<c10::ScalarType>(key.tokens[i]);
    const int64_t device = key.tokens[i + 1];
    const bool contiguous = key.tokens[i + 2] != 0;
    const int64_t rank = key.tokens[i + 3];
    out += std::string(first ? "" : ", ") + dtype_name(dtype) + "[";
    for (int64_t axis = 0; axis < rank; ++axis)
      out += (axis ? ", " : "") + std::to_string(key.tokens[i + 4 + axis]);
    out += "] cuda:" + std::to_string(device) + (contiguous ? "" : " non-contiguous");
    i += 4 + static_cast<size_t>(rank);
  }
  return out + ")";
}

}  // namespace aitune
