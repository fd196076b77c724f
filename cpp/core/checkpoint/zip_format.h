// Internal to the checkpoint container (zip_archive.h): the ZIP record layout both zip_writer.cc
// and zip_reader.cc use, and the messages they share. Not part of the public API.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "checkpoint/zip64.h"
#include "checkpoint/zip_archive.h"
#include "common/status.h"

namespace aitune::zip {

static_assert(std::endian::native == std::endian::little,
              "the ZIP field and CRC code assume a little-endian host");

using zip64::get16;
using zip64::get32;
using zip64::kMax16;
using zip64::kMax32;  // a 32-bit field at this value means "see ZIP64"
using zip64::put16;
using zip64::put32;

// ZIP records (PKWARE APPNOTE.TXT 4.3.7 local header, 4.3.12 central header, 4.3.16 end record).
inline constexpr uint32_t kLocalSig = 0x04034b50;
inline constexpr uint32_t kCentralSig = 0x02014b50;
inline constexpr uint32_t kEndSig = 0x06054b50;
inline constexpr uint64_t kLocalSize = 30;
inline constexpr uint64_t kCentralSize = 46;
inline constexpr uint64_t kEndSize = 22;
inline constexpr uint16_t kVersionNeeded = 10;   // 1.0: stored entries only (45 with ZIP64)
inline constexpr uint16_t kMadeByUnix = 3 << 8;  // host 3 (Unix): external attributes carry st_mode
inline constexpr uint16_t kVersionMadeBy = kMadeByUnix | 20;
inline constexpr uint16_t kFlagEncrypted = 1 << 0;
inline constexpr uint16_t kFlagDataDescriptor = 1 << 3;
inline constexpr uint16_t kFlagStrongEncryption = 1 << 6;
inline constexpr uint16_t kFlagUtf8 = 1 << 11;
inline constexpr uint16_t kDosDate1980 =
    (1 << 5) | 1;  // fixed 1980-01-01 00:00: same inputs give the same bytes
inline constexpr uint32_t kRegularFileAttributes = 0100644u << 16;
// Android zipalign's extra field: u16 id, u16 size, u16 alignment, zero padding. Python's zipfile
// and unzip skip unknown extra fields.
inline constexpr uint16_t kAlignExtraId = 0xD935;
inline constexpr uint64_t kAlignExtraMin = 6;

inline Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }

inline Status errno_status(const std::string& what, int err) {
  return internal_error(what + ": " + std::strerror(err));
}

inline std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

// Bytes of alignment extra field so that data after a header ending at `header_end` starts on a
// kEntryAlignment boundary: 0, or at least kAlignExtraMin.
inline uint64_t align_padding(uint64_t header_end) {
  uint64_t pad = (kEntryAlignment - header_end % kEntryAlignment) % kEntryAlignment;
  if (pad != 0 && pad < kAlignExtraMin) pad += kEntryAlignment;
  return pad;
}

}  // namespace aitune::zip
