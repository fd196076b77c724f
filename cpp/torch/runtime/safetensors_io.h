// Minimal safetensors reader/writer for the C++ runtime and CLI (`aitune run --inputs/--outputs`,
// the samples stored in checkpoints). torch ships no C++ safetensors API; the format is simple:
// an 8-byte little-endian header length N, N bytes of JSON header
// {name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the raw little-endian tensor bytes (offsets relative to the end of the header).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace aitune {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Parses safetensors bytes; every tensor is copied into a fresh CPU tensor. Entries come back in
// data-offset order. kCorrupt for a malformed file, kUnsupported for an unknown dtype.
StatusOr<NamedTensors> parse_safetensors(std::string_view bytes);
// Reads a file; kNotFound when it cannot be opened.
StatusOr<NamedTensors> read_safetensors_file(const std::string& path);

// Serialises `tensors` (any device; copied to the CPU, made contiguous) in the given order.
// kInvalidArgument for duplicate names, undefined tensors or dtypes safetensors cannot hold.
StatusOr<std::string> serialize_safetensors(const NamedTensors& tensors);
Status write_safetensors_file(const std::string& path, const NamedTensors& tensors);

// safetensors dtype codes ("F32", "BF16", "I64", "BOOL", ...) <-> torch scalar types.
StatusOr<c10::ScalarType> safetensors_dtype(std::string_view code);
StatusOr<std::string> safetensors_dtype_code(c10::ScalarType type);

}  // namespace aitune
