// CRC-32 (the ZIP / zlib polynomial), slice-by-8. ZIP requires it in every header; SHA-256
// (sha256.h) is the integrity check.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aitune {

// `crc` is the value so far (0 to start), as zlib's crc32().
uint32_t crc32_update(uint32_t crc, const char* data, size_t n);

}  // namespace aitune
