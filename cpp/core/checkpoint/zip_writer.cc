// ArchiveWriter (zip_archive.h): lays out the archive, writes it to a temporary file and renames it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "checkpoint/crc32.h"
#include "checkpoint/entry_name.h"
#include "checkpoint/posix_file.h"
#include "checkpoint/sha256.h"
#include "checkpoint/zip_archive.h"
#include "checkpoint/zip_format.h"

namespace aitune {

using namespace zip;  // the record layout and file helpers (zip_format.h, posix_file.h, entry_name.h)

ArchiveWriter::ArchiveWriter(std::string final_path, std::string temp_path, int fd, ZipWriteOptions options)
    : final_path_(std::move(final_path)), temp_path_(std::move(temp_path)), fd_(fd), options_(options) {}

StatusOr<ArchiveWriter> ArchiveWriter::create(std::string final_path, ZipWriteOptions options) {
  AITUNE_CHECK_ARG(!final_path.empty(), "Checkpoint path must not be empty");
  // Unique per writer, not per process: two threads saving to one path must not share (and
  // truncate) one temporary file. O_EXCL: never write into a file someone else made.
  static std::atomic<uint64_t> counter{0};
  std::string temp_path = final_path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return invalid_argument("Cannot create checkpoint " + in_quotes(final_path) + " (temporary file " +
                            in_quotes(temp_path) + "): " + std::strerror(errno));
  }
  return ArchiveWriter(std::move(final_path), std::move(temp_path), fd, options);
}

ArchiveWriter::ArchiveWriter(ArchiveWriter&& other) noexcept
    : final_path_(std::move(other.final_path_)),
      temp_path_(std::move(other.temp_path_)),
      fd_(std::exchange(other.fd_, -1)),
      options_(other.options_),
      finished_(other.finished_),
      pending_(std::move(other.pending_)),
      names_(std::move(other.names_)) {}

ArchiveWriter& ArchiveWriter::operator=(ArchiveWriter&& other) noexcept {
  if (this != &other) {
    abandon();
    final_path_ = std::move(other.final_path_);
    temp_path_ = std::move(other.temp_path_);
    fd_ = std::exchange(other.fd_, -1);
    options_ = other.options_;
    finished_ = other.finished_;
    pending_ = std::move(other.pending_);
    names_ = std::move(other.names_);
  }
  return *this;
}

ArchiveWriter::~ArchiveWriter() { abandon(); }

void ArchiveWriter::abandon() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  if (!finished_) ::unlink(temp_path_.c_str());
}

Status ArchiveWriter::check_new_name(const std::string& entry_name) const {
  if (fd_ < 0)
    return invalid_argument("Checkpoint writer for " + in_quotes(final_path_) + " is already finished");
  if (classify_entry_name(entry_name) != NameIssue::kNone) {
    return invalid_argument("Invalid checkpoint entry name " + in_quotes(entry_name) +
                            ": expected a relative '/'-separated path without '..', '.', empty parts or "
                            "backslashes");
  }
  if (entry_name == kManifestEntryName) {
    return invalid_argument("Entry name 'manifest.json' is reserved for the checkpoint manifest");
  }
  if (names_.count(entry_name) != 0)
    return invalid_argument("Duplicate checkpoint entry " + in_quotes(entry_name));
  return Status::Ok();
}

Status ArchiveWriter::add_file(std::string entry_name, std::string source_path) {
  AITUNE_RETURN_IF_ERROR(check_new_name(entry_name));
  Fd fd(::open(source_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return invalid_argument("Cannot read " + in_quotes(source_path) + " for checkpoint entry " +
                            in_quotes(entry_name) + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return invalid_argument("Checkpoint entry " + in_quotes(entry_name) + ": " + in_quotes(source_path) +
                            " is not a regular file");
  }
  Pending p;
  p.record.path = entry_name;
  p.source_path = std::move(source_path);
  p.from_file = true;
  Sha256 sha;
  std::string buf(kChunk, '\0');
  while (true) {
    const ssize_t r = read_some(fd.get(), buf.data(), buf.size());
    if (r < 0) return errno_status("Cannot read " + in_quotes(p.source_path), errno);
    if (r == 0) break;
    sha.update(buf.data(), static_cast<size_t>(r));
    p.crc32 = crc32_update(p.crc32, buf.data(), static_cast<size_t>(r));
    p.record.size += static_cast<uint64_t>(r);
  }
  p.record.sha256 = sha.hex();
  if (p.record.sha256.empty())
    return internal_error("OpenSSL SHA-256 failed for " + in_quotes(p.source_path));
  names_.insert(entry_name);
  pending_.push_back(std::move(p));
  return Status::Ok();
}

Status ArchiveWriter::add_bytes(std::string entry_name, std::string_view data) {
  AITUNE_RETURN_IF_ERROR(check_new_name(entry_name));
  Pending p;
  p.record.path = entry_name;
  p.record.size = data.size();
  p.record.sha256 = sha256_hex(data);
  if (p.record.sha256.empty())
    return internal_error("OpenSSL SHA-256 failed for entry " + in_quotes(entry_name));
  p.crc32 = crc32_update(0, data.data(), data.size());
  p.bytes.assign(data);
  names_.insert(entry_name);
  pending_.push_back(std::move(p));
  return Status::Ok();
}

std::vector<FileRecord> ArchiveWriter::files() const {
  std::vector<FileRecord> out;
  out.reserve(pending_.size());
  for (const auto& p : pending_) out.push_back(p.record);
  return out;
}

namespace {

// One entry's place in the archive. The local header's ZIP64 field (sizes only) comes before the
// alignment field, so the padding accounts for it.
struct Slot {
  std::string_view name;
  uint64_t size;
  uint32_t crc;
  uint64_t offset = 0;   // local header
  uint64_t padding = 0;  // alignment extra field length
  bool zip64_size = false, zip64_offset = false;

  bool zip64() const { return zip64_size || zip64_offset; }
  uint16_t version_needed() const { return zip64() ? zip64::kVersion : kVersionNeeded; }
  zip64::ExtraValues local_extra() const {
    zip64::ExtraValues v;
    if (zip64_size) v.usize = v.csize = size;
    return v;
  }
  zip64::ExtraValues central_extra() const {
    zip64::ExtraValues v = local_extra();
    if (zip64_offset) v.offset = offset;
    return v;
  }
};

// Offsets, and which values need ZIP64 (zip64.h); returns the central directory's offset and
// sets its size.
uint64_t lay_out(std::vector<Slot>& slots, bool force, uint64_t& central_size) {
  uint64_t offset = 0;
  central_size = 0;
  for (auto& s : slots) {
    s.offset = offset;
    s.zip64_size = force || s.size >= kMax32;
    s.zip64_offset = force || s.offset >= kMax32;
    const uint64_t header = kLocalSize + s.name.size() + zip64::extra_size(s.local_extra());
    s.padding = align_padding(offset + header);
    offset += header + s.padding + s.size;
    central_size += kCentralSize + s.name.size() + zip64::extra_size(s.central_extra());
  }
  return offset;
}

std::string local_header(const Slot& s) {
  std::string h;
  put32(h, kLocalSig);
  put16(h, s.version_needed());
  put16(h, kFlagUtf8);
  put16(h, 0);  // stored
  put16(h, 0);  // time
  put16(h, kDosDate1980);
  put32(h, s.crc);
  put32(h, s.zip64_size ? kMax32 : static_cast<uint32_t>(s.size));
  put32(h, s.zip64_size ? kMax32 : static_cast<uint32_t>(s.size));
  put16(h, static_cast<uint16_t>(s.name.size()));
  put16(h, static_cast<uint16_t>(zip64::extra_size(s.local_extra()) + s.padding));
  h.append(s.name);
  zip64::append_extra(h, s.local_extra());
  if (s.padding > 0) {
    put16(h, kAlignExtraId);
    put16(h, static_cast<uint16_t>(s.padding - 4));
    put16(h, static_cast<uint16_t>(kEntryAlignment));
    h.append(s.padding - kAlignExtraMin, '\0');
  }
  return h;
}

// Streams `source_path` into `fd` again; the CRC recorded when it was added detects a file that
// changed in between.
Status stream_file(int fd, const std::string& where, const std::string& source_path, const std::string& entry,
                   uint64_t size, uint32_t expected_crc) {
  Fd src(::open(source_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (src.get() < 0) return errno_status(where + ": cannot reopen " + in_quotes(source_path), errno);
  std::string buf(kChunk, '\0');
  uint64_t copied = 0;
  uint32_t crc = 0;
  while (true) {
    const ssize_t r = read_some(src.get(), buf.data(), buf.size());
    if (r < 0) return errno_status(where + ": cannot read " + in_quotes(source_path), errno);
    if (r == 0) break;
    copied += static_cast<uint64_t>(r);
    if (copied > size) break;  // grew: reported below
    crc = crc32_update(crc, buf.data(), static_cast<size_t>(r));
    if (!write_all(fd, buf.data(), static_cast<size_t>(r))) return errno_status(where, errno);
  }
  if (copied != size || crc != expected_crc) {
    return internal_error(where + ": " + in_quotes(source_path) + " (entry " + in_quotes(entry) +
                          ") changed after it was added; expected " + std::to_string(size) +
                          " bytes as hashed then");
  }
  return Status::Ok();
}

// The central directory, the ZIP64 end records when needed, and the end record.
std::string central_directory(const std::vector<Slot>& slots, uint64_t central_offset, uint64_t central_size,
                              bool force) {
  const bool zip64_end =
      force || slots.size() >= kMax16 || central_offset >= kMax32 || central_size >= kMax32;
  std::string central;
  central.reserve(central_size + zip64::kEndSize + zip64::kLocatorSize + kEndSize);
  for (const auto& s : slots) {
    put32(central, kCentralSig);
    put16(central, s.zip64() ? kMadeByUnix | zip64::kVersion : kVersionMadeBy);
    put16(central, s.version_needed());
    put16(central, kFlagUtf8);
    put16(central, 0);  // stored
    put16(central, 0);  // time
    put16(central, kDosDate1980);
    put32(central, s.crc);
    put32(central, s.zip64_size ? kMax32 : static_cast<uint32_t>(s.size));
    put32(central, s.zip64_size ? kMax32 : static_cast<uint32_t>(s.size));
    put16(central, static_cast<uint16_t>(s.name.size()));
    put16(central, static_cast<uint16_t>(zip64::extra_size(s.central_extra())));
    put16(central, 0);  // comment
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, kRegularFileAttributes);
    put32(central, s.zip64_offset ? kMax32 : static_cast<uint32_t>(s.offset));
    central.append(s.name);
    zip64::append_extra(central, s.central_extra());
  }
  // With ZIP64, a classic field that cannot hold its value (all of them when forced) is a sentinel.
  if (zip64_end) {
    const zip64::EndRecord end{slots.size(), central_size, central_offset, central_offset + central_size};
    zip64::append_end(central, end, kMadeByUnix | zip64::kVersion);
  }
  const uint64_t count = slots.size();
  put32(central, kEndSig);
  put16(central, 0);
  put16(central, 0);
  put16(central, force || count >= kMax16 ? kMax16 : static_cast<uint16_t>(count));
  put16(central, force || count >= kMax16 ? kMax16 : static_cast<uint16_t>(count));
  put32(central, force || central_size >= kMax32 ? kMax32 : static_cast<uint32_t>(central_size));
  put32(central, force || central_offset >= kMax32 ? kMax32 : static_cast<uint32_t>(central_offset));
  put16(central, 0);  // comment
  return central;
}

}  // namespace

Status ArchiveWriter::finish(std::string_view manifest_json) {
  if (fd_ < 0)
    return invalid_argument("Checkpoint writer for " + in_quotes(final_path_) + " is already finished");
  const std::string where = "Cannot write checkpoint " + in_quotes(final_path_);
  auto fail = [this](Status s) {
    abandon();  // closes and removes the temp file; the writer is spent
    return s;
  };

  // Layout first, then the entries in order, then the central directory.
  const bool force = options_.force_zip64;
  std::vector<Slot> slots;
  slots.reserve(pending_.size() + 1);
  slots.push_back({kManifestEntryName, manifest_json.size(),
                   crc32_update(0, manifest_json.data(), manifest_json.size())});
  for (const auto& p : pending_) slots.push_back({p.record.path, p.record.size, p.crc32});
  uint64_t central_size = 0;
  const uint64_t central_offset = lay_out(slots, force, central_size);

  auto write_header = [&](const Slot& s) {
    const std::string h = local_header(s);
    return write_all(fd_, h.data(), h.size());
  };
  if (!write_header(slots[0]) || !write_all(fd_, manifest_json.data(), manifest_json.size())) {
    return fail(errno_status(where, errno));
  }
  for (size_t i = 0; i < pending_.size(); ++i) {
    const Pending& p = pending_[i];
    if (!write_header(slots[i + 1])) return fail(errno_status(where, errno));
    if (!p.from_file) {
      if (!write_all(fd_, p.bytes.data(), p.bytes.size())) return fail(errno_status(where, errno));
      continue;
    }
    if (Status s = stream_file(fd_, where, p.source_path, p.record.path, p.record.size, p.crc32); !s.ok())
      return fail(s);
  }

  const std::string central = central_directory(slots, central_offset, central_size, force);
  if (!write_all(fd_, central.data(), central.size()) || ::fsync(fd_) != 0)
    return fail(errno_status(where, errno));

  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0 || ::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_path_.c_str());
    return errno_status(where, err);
  }
  finished_ = true;
  sync_parent_dir(final_path_);
  for (auto& p : pending_) std::string().swap(p.bytes);  // files() stays available; the copies go
  return Status::Ok();
}

}  // namespace aitune
