// ZIP64 records for the checkpoint container (zip_writer.cc, zip_reader.cc), per PKWARE APPNOTE.TXT: 4.3.14
// ZIP64 end of central directory record, 4.3.15 its locator, 4.5.3 ZIP64 extended information extra field. A
// 32-bit size or offset field at 0xFFFFFFFF (a 16-bit count or disk field at 0xFFFF) means "the value is in
// the ZIP64 record". Encoding for ArchiveWriter, bounds-checked decoding for ArchiveReader, and the
// little-endian field helpers both files use.
//
// Decoding errors are kCorrupt (or kUnsupported for multi-disk archives and extensible data) with a
// message fragment; the caller prefixes the checkpoint and entry names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace aitune::zip64 {

inline constexpr uint32_t kMax32 = 0xFFFFFFFF;
inline constexpr uint16_t kMax16 = 0xFFFF;
inline constexpr uint16_t kVersion = 45;  // "version needed" for ZIP64 (APPNOTE 4.4.3.2)
inline constexpr uint16_t kExtraId = 0x0001;
inline constexpr uint32_t kEndSig = 0x06064b50;
inline constexpr uint32_t kLocatorSig = 0x07064b50;
inline constexpr uint64_t kEndSize = 56;  // without the extensible data sector, which is never written
inline constexpr uint64_t kLocatorSize = 20;

// ---- little-endian fields

inline void put16(std::string& b, uint16_t v) {
  b.push_back(static_cast<char>(v & 0xFF));
  b.push_back(static_cast<char>(v >> 8));
}
inline void put32(std::string& b, uint32_t v) {
  put16(b, static_cast<uint16_t>(v & 0xFFFF));
  put16(b, static_cast<uint16_t>(v >> 16));
}
inline void put64(std::string& b, uint64_t v) {
  put32(b, static_cast<uint32_t>(v & kMax32));
  put32(b, static_cast<uint32_t>(v >> 32));
}
inline uint16_t get16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t get32(const unsigned char* p) {
  return static_cast<uint32_t>(get16(p)) | (static_cast<uint32_t>(get16(p + 2)) << 16);
}
inline uint64_t get64(const unsigned char* p) {
  return get32(p) | (static_cast<uint64_t>(get32(p + 4)) << 32);
}

// ---- extended information extra field (4.5.3)

// The values the field carries, in its fixed order. A value is present exactly when the header's
// own field holds the sentinel; the local header has no offset or disk field.
struct ExtraValues {
  std::optional<uint64_t> usize;   // original (uncompressed) size
  std::optional<uint64_t> csize;   // compressed size
  std::optional<uint64_t> offset;  // relative offset of the local header
  std::optional<uint32_t> disk;    // disk start number
};

// Bytes append_extra writes: 0 when no value is present, else 4 + 8 per 64-bit value (+ 4 for disk).
uint64_t extra_size(const ExtraValues& v);
void append_extra(std::string& out, const ExtraValues& v);

// Which of a header's fields hold the sentinel, i.e. which values its ZIP64 field must hold.
struct Sentinels {
  bool usize = false, csize = false, offset = false, disk = false;
};

// Finds the ZIP64 field in a header's extra area (`length` bytes at `extra`, every field's
// length checked against it) and returns its values. kCorrupt when a field overruns the area, the
// ZIP64 field appears twice, is missing while a sentinel asks for it, or its length is not
// exactly what the sentinels call for.
StatusOr<ExtraValues> read_extra(const unsigned char* extra, uint64_t length, Sentinels want);

// ---- end record (4.3.14) and locator (4.3.15)

struct EndRecord {
  uint64_t count = 0;           // entries in the central directory
  uint64_t central_size = 0;    // bytes
  uint64_t central_offset = 0;  // from the start of the file
  uint64_t record_offset = 0;   // where the ZIP64 end record itself starts
};

// Appends the ZIP64 end record (placed at end.record_offset) and its locator.
void append_end(std::string& out, const EndRecord& end, uint16_t version_made_by);

// The classic end record's fields (4.3.16), widened.
struct ClassicEnd {
  uint64_t disk, central_disk, count_disk, count, central_size, central_offset;
};

// Reads the locator at `locator_offset` (just before the classic end record at the file's tail,
// `base` being the whole file) and the ZIP64 end record it points to, which must end where the
// locator starts. Each classic field must hold its sentinel or agree with the ZIP64 value.
StatusOr<EndRecord> read_end(const unsigned char* base, uint64_t locator_offset, const ClassicEnd& classic);

}  // namespace aitune::zip64
