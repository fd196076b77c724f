#include "checkpoint/zip64.h"

#include <cstdio>
#include <vector>

namespace aitune::zip64 {
namespace {

Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }

std::string hex16(uint16_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", v);
  return buf;
}

// "the original size and the local header offset": the values a ZIP64 field is expected to hold.
std::string describe(const Sentinels& want) {
  std::vector<std::string> parts;
  if (want.usize) parts.push_back("the original size");
  if (want.csize) parts.push_back("the compressed size");
  if (want.offset) parts.push_back("the local header offset");
  if (want.disk) parts.push_back("the disk start number");
  if (parts.empty()) return "no value, as no header field is at 0xFFFFFFFF or 0xFFFF";
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  }
  return out;
}

}  // namespace

uint64_t extra_size(const ExtraValues& v) {
  const uint64_t n =
      8 * (v.usize.has_value() + v.csize.has_value() + v.offset.has_value()) + 4 * v.disk.has_value();
  return n == 0 ? 0 : 4 + n;
}

void append_extra(std::string& out, const ExtraValues& v) {
  const uint64_t n = extra_size(v);
  if (n == 0) return;
  put16(out, kExtraId);
  put16(out, static_cast<uint16_t>(n - 4));
  if (v.usize) put64(out, *v.usize);
  if (v.csize) put64(out, *v.csize);
  if (v.offset) put64(out, *v.offset);
  if (v.disk) put32(out, *v.disk);
}

StatusOr<ExtraValues> read_extra(const unsigned char* extra, uint64_t length, Sentinels want) {
  const unsigned char* field = nullptr;
  uint64_t field_size = 0;
  // Fields are (u16 id, u16 size, data); fewer than 4 trailing bytes are padding, as zipfile allows.
  for (uint64_t p = 0; length - p >= 4;) {
    const uint16_t id = get16(extra + p), n = get16(extra + p + 2);
    if (n > length - p - 4) {
      return corrupt("extra field " + hex16(id) + " at byte " + std::to_string(p) +
                     " of the extra area declares " + std::to_string(n) + " bytes, but only " +
                     std::to_string(length - p - 4) + " remain");
    }
    if (id == kExtraId) {
      if (field != nullptr) return corrupt("two ZIP64 extra fields");
      field = extra + p + 4;
      field_size = n;
    }
    p += 4 + n;
  }
  const uint64_t expected = 8 * (want.usize + want.csize + want.offset) + 4 * want.disk;
  if (field == nullptr) {
    if (expected == 0) return ExtraValues{};
    return corrupt("no ZIP64 extra field, but the header defers " + describe(want) +
                   " to it (field at 0xFFFFFFFF)");
  }
  if (field_size != expected) {
    return corrupt("ZIP64 extra field holds " + std::to_string(field_size) + " bytes, expected " +
                   std::to_string(expected) + " (" + describe(want) + ")");
  }
  ExtraValues v;
  const unsigned char* q = field;
  if (want.usize) {
    v.usize = get64(q);
    q += 8;
  }
  if (want.csize) {
    v.csize = get64(q);
    q += 8;
  }
  if (want.offset) {
    v.offset = get64(q);
    q += 8;
  }
  if (want.disk) v.disk = get32(q);
  return v;
}

void append_end(std::string& out, const EndRecord& end, uint16_t version_made_by) {
  put32(out, kEndSig);
  put64(out, kEndSize - 12);  // size of the rest of the record
  put16(out, version_made_by);
  put16(out, kVersion);
  put32(out, 0);  // this disk
  put32(out, 0);  // disk with the central directory
  put64(out, end.count);
  put64(out, end.count);
  put64(out, end.central_size);
  put64(out, end.central_offset);
  put32(out, kLocatorSig);
  put32(out, 0);  // disk with the ZIP64 end record
  put64(out, end.record_offset);
  put32(out, 1);  // disks in all
}

StatusOr<EndRecord> read_end(const unsigned char* base, uint64_t locator_offset, const ClassicEnd& classic) {
  const unsigned char* loc = base + locator_offset;
  const uint32_t locator_disk = get32(loc + 4), disks = get32(loc + 16);
  const uint64_t at = get64(loc + 8);
  if (locator_disk != 0 || disks > 1) {
    return Status(StatusCode::kUnsupported, "multi-disk archive (ZIP64 locator: disk " +
                                                std::to_string(locator_disk) + " of " +
                                                std::to_string(disks) + ")");
  }
  if (locator_offset < kEndSize || at > locator_offset - kEndSize) {
    return corrupt("the ZIP64 end-of-central-directory locator points to offset " + std::to_string(at) +
                   ", but a " + std::to_string(kEndSize) +
                   "-byte ZIP64 end record does not fit before the locator at " +
                   std::to_string(locator_offset));
  }
  const unsigned char* r = base + at;
  if (get32(r) != kEndSig) return corrupt("bad ZIP64 end record signature at offset " + std::to_string(at));
  const uint64_t record_size = get64(r + 4);
  if (record_size < kEndSize - 12) {
    return corrupt("ZIP64 end record size field is " + std::to_string(record_size) + ", expected at least " +
                   std::to_string(kEndSize - 12));
  }
  if (record_size > kEndSize - 12) {
    return Status(StatusCode::kUnsupported, "ZIP64 end record with an extensible data sector (" +
                                                std::to_string(record_size - (kEndSize - 12)) + " bytes)");
  }
  if (at + kEndSize != locator_offset) {
    return corrupt("ZIP64 end record at offset " + std::to_string(at) + " ends at " +
                   std::to_string(at + kEndSize) + ", not at its locator at " +
                   std::to_string(locator_offset));
  }
  const uint32_t disk = get32(r + 16), central_disk = get32(r + 20);
  EndRecord end;
  const uint64_t count_disk = get64(r + 24);
  end.count = get64(r + 32);
  end.central_size = get64(r + 40);
  end.central_offset = get64(r + 48);
  end.record_offset = at;
  if (disk != 0 || central_disk != 0 || count_disk != end.count) {
    return Status(StatusCode::kUnsupported, "multi-disk archive (ZIP64 end record)");
  }
  struct Pair {
    const char* field;
    uint64_t classic, zip64, sentinel;
  };
  for (const Pair& p :
       {Pair{"disk number", classic.disk, 0, kMax16},
        Pair{"central directory disk", classic.central_disk, 0, kMax16},
        Pair{"entries on this disk", classic.count_disk, end.count, kMax16},
        Pair{"entry count", classic.count, end.count, kMax16},
        Pair{"central directory size", classic.central_size, end.central_size, kMax32},
        Pair{"central directory offset", classic.central_offset, end.central_offset, kMax32}}) {
    if (p.classic != p.sentinel && p.classic != p.zip64) {
      return corrupt(std::string("the end record's ") + p.field + " (" + std::to_string(p.classic) +
                     ") disagrees with the ZIP64 end record's (" + std::to_string(p.zip64) + ")");
    }
  }
  return end;
}

}  // namespace aitune::zip64
