// See safetensors_io.h: torch has no C++ safetensors API, so this is a small hand-written
// reader/writer of the format (8-byte little-endian header length, JSON header, raw bytes).
#include "runtime/safetensors_io.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "checkpoint/manifest_schema.h"

namespace aitune {
namespace {

const std::vector<std::pair<const char*, c10::ScalarType>>& dtype_table() {
  static const std::vector<std::pair<const char*, c10::ScalarType>> table = {
      {"F64", c10::kDouble},
      {"F32", c10::kFloat},
      {"F16", c10::kHalf},
      {"BF16", c10::kBFloat16},
      {"I64", c10::kLong},
      {"I32", c10::kInt},
      {"I16", c10::kShort},
      {"I8", c10::kChar},
      {"U8", c10::kByte},
      {"BOOL", c10::kBool},
      {"F8_E4M3", c10::ScalarType::Float8_e4m3fn},
      {"F8_E5M2", c10::ScalarType::Float8_e5m2},
      {"C64", c10::kComplexFloat},
      {"C128", c10::kComplexDouble},
      {"U16", c10::ScalarType::UInt16},
      {"U32", c10::ScalarType::UInt32},
      {"U64", c10::ScalarType::UInt64},
  };
  return table;
}

Status corrupt(std::string m) { return {StatusCode::kCorrupt, "Invalid safetensors data: " + std::move(m)}; }

}  // namespace

StatusOr<c10::ScalarType> safetensors_dtype(std::string_view code) {
  for (const auto& [name, type] : dtype_table()) {
    if (code == name) return type;
  }
  return unsupported("Unsupported safetensors dtype '" + std::string(code) + "'");
}

StatusOr<std::string> safetensors_dtype_code(c10::ScalarType type) {
  for (const auto& [name, t] : dtype_table()) {
    if (t == type) return std::string(name);
  }
  return invalid_argument(std::string("safetensors cannot store dtype ") + c10::toString(type));
}

StatusOr<NamedTensors> parse_safetensors(std::string_view bytes) {
  if (bytes.size() < 8) return corrupt("shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
  if (header_len > bytes.size() - 8)
    return corrupt("header length " + std::to_string(header_len) + " exceeds the data");
  // nlohmann recurses per nesting level: refuse deep nesting before parsing (a stack overflow).
  if (Status s = check_json_nesting(bytes.substr(8, header_len), kMaxJsonNesting, "the safetensors header");
      !s.ok()) {
    return corrupt(s.message());
  }
  nlohmann::json header =
      nlohmann::json::parse(bytes.substr(8, header_len), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return corrupt("the header is not a JSON object");
  const std::string_view data = bytes.substr(8 + header_len);
  struct Entry {
    std::string name;
    c10::ScalarType type;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  try {
    for (const auto& [name, info] : header.items()) {
      if (name == "__metadata__") continue;
      if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
          !info.contains("data_offsets"))
        return corrupt("entry '" + name + "' lacks dtype, shape or data_offsets");
      AITUNE_ASSIGN_OR_RETURN(c10::ScalarType type, safetensors_dtype(info["dtype"].get<std::string>()));
      Entry e{name, type, info["shape"].get<std::vector<int64_t>>(), 0, 0};
      const auto offsets = info["data_offsets"].get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data.size())
        return corrupt("entry '" + name + "' has data offsets outside the data");
      e.begin = offsets[0];
      e.end = offsets[1];
      uint64_t numel = 1;
      for (int64_t d : e.shape) {
        if (d < 0) return corrupt("entry '" + name + "' has a negative dimension");
        // Checked: a shape such as [2^32, 2^32] wraps to 0 elements and would pass the size test.
        if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel)) {
          return corrupt("entry '" + name + "' has shape " + info["shape"].dump() +
                         ", more elements than 2^64");
        }
      }
      uint64_t nbytes = 0;
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(c10::elementSize(type)), &nbytes) ||
          nbytes != e.end - e.begin)
        return corrupt("entry '" + name + "' holds " + std::to_string(e.end - e.begin) +
                       " bytes, its shape " + info["shape"].dump() + " needs " + std::to_string(nbytes));
      entries.push_back(std::move(e));
    }
  } catch (const std::exception& ex) {
    return corrupt(ex.what());
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.name < b.name;
  });
  NamedTensors out;
  try {
    for (const Entry& e : entries) {
      at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type).device(at::kCPU));
      if (e.end > e.begin) std::memcpy(t.data_ptr(), data.data() + e.begin, e.end - e.begin);
      out.emplace_back(e.name, std::move(t));
    }
  } catch (const std::exception& ex) {
    return Status(StatusCode::kInternal, std::string("Failed to allocate safetensors tensors: ") + ex.what());
  }
  return out;
}

StatusOr<NamedTensors> read_safetensors_file(const std::string& path) {
  std::error_code ec;
  const auto kind = std::filesystem::status(path, ec).type();
  if (kind == std::filesystem::file_type::not_found) return not_found("Cannot open safetensors file " + path);
  // Reading a FIFO or a device would wait or never end.
  if (kind != std::filesystem::file_type::regular)
    return invalid_argument("safetensors file " + path + " is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("Cannot open safetensors file " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_safetensors(buffer.str());
}

StatusOr<std::string> serialize_safetensors(const NamedTensors& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::vector<at::Tensor> contiguous;
  std::set<std::string> names;
  uint64_t offset = 0;
  try {
    for (const auto& [name, tensor] : tensors) {
      if (name == "__metadata__" || !names.insert(name).second)
        return invalid_argument("Duplicate or reserved safetensors tensor name '" + name + "'");
      if (!tensor.defined()) return invalid_argument("Tensor '" + name + "' is undefined");
      AITUNE_ASSIGN_OR_RETURN(std::string code, safetensors_dtype_code(tensor.scalar_type()));
      at::Tensor c = tensor.detach().to(at::kCPU).contiguous();
      const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * c.element_size();
      header[name] = {
          {"dtype", code}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
      offset += nbytes;
      contiguous.push_back(std::move(c));
    }
  } catch (const std::exception& ex) {
    return Status(StatusCode::kInternal, std::string("Failed to serialise tensors: ") + ex.what());
  }
  std::string head = tensors.empty() ? std::string("{}") : header.dump();
  while (head.size() % 8 != 0) head.push_back(' ');
  std::string out;
  out.reserve(8 + head.size() + offset);
  uint64_t len = head.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += head;
  for (const at::Tensor& c : contiguous) {
    out.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
  }
  return out;
}

Status write_safetensors_file(const std::string& path, const NamedTensors& tensors) {
  AITUNE_ASSIGN_OR_RETURN(std::string bytes, serialize_safetensors(tensors));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return invalid_argument("Cannot write " + path);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return internal_error("Failed writing " + path);
  return Status::Ok();
}

}  // namespace aitune
