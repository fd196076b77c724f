#include "checkpoint/zip_archive.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "checkpoint/zip64.h"

namespace aitune {
namespace {

static_assert(std::endian::native == std::endian::little, "the ZIP field and CRC code assume a little-endian host");

using zip64::get16;
using zip64::get32;
using zip64::kMax16;
using zip64::kMax32;  // a 32-bit field at this value means "see ZIP64"
using zip64::put16;
using zip64::put32;

// ZIP records (PKWARE APPNOTE.TXT 4.3.7 local header, 4.3.12 central header, 4.3.16 end record).
constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint64_t kLocalSize = 30;
constexpr uint64_t kCentralSize = 46;
constexpr uint64_t kEndSize = 22;
constexpr uint16_t kVersionNeeded = 10;   // 1.0: stored entries only (45 with ZIP64)
constexpr uint16_t kMadeByUnix = 3 << 8;  // host 3 (Unix): external attributes carry st_mode
constexpr uint16_t kVersionMadeBy = kMadeByUnix | 20;
constexpr uint16_t kFlagEncrypted = 1 << 0;
constexpr uint16_t kFlagDataDescriptor = 1 << 3;
constexpr uint16_t kFlagStrongEncryption = 1 << 6;
constexpr uint16_t kFlagUtf8 = 1 << 11;
constexpr uint16_t kDosDate1980 = (1 << 5) | 1;  // fixed 1980-01-01 00:00: same inputs give the same bytes
constexpr uint32_t kRegularFileAttributes = 0100644u << 16;
// Android zipalign's extra field: u16 id, u16 size, u16 alignment, zero padding. Python's zipfile
// and unzip skip unknown extra fields.
constexpr uint16_t kAlignExtraId = 0xD935;
constexpr uint64_t kAlignExtraMin = 6;
constexpr size_t kChunk = size_t{1} << 20;  // streaming buffer, bytes

Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }

Status errno_status(const std::string& what, int err) { return internal_error(what + ": " + std::strerror(err)); }

std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

// The docs/reference/checkpoint.md#integrity-and-compatibility message, with a Python-style list so it reads
// the same as the Python layer's.
Status hash_failure(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + in_quotes(n);
  return corrupt("Failed to verify SHA hashes for files: [" + list + "]");
}

Status escapes(std::string_view name) { return corrupt("Entry " + in_quotes(name) + " resolves outside checkpoint"); }

// ---- CRC-32 (ZIP / zlib polynomial), slice-by-8: ZIP requires it; SHA-256 is the integrity check.

struct Crc32Tables {
  uint32_t t[8][256];
};

const Crc32Tables& crc_tables() {
  static const Crc32Tables tables = [] {
    Crc32Tables c{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t v = i;
      for (int k = 0; k < 8; ++k) v = (v >> 1) ^ (0xEDB88320u & (0u - (v & 1u)));
      c.t[0][i] = v;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) c.t[s][i] = (c.t[s - 1][i] >> 8) ^ c.t[0][c.t[s - 1][i] & 0xFF];
    }
    return c;
  }();
  return tables;
}

// `crc` is the value so far (0 to start), as zlib's crc32().
uint32_t crc32_update(uint32_t crc, const char* data, size_t n) {
  const auto& t = crc_tables().t;
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
          t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
  return ~crc;
}

// ---- SHA-256 through OpenSSL's EVP API. A failed OpenSSL call yields "" (never a valid hash).

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { ok_ = ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1; }
  void update(const void* data, size_t n) { ok_ = ok_ && EVP_DigestUpdate(ctx_.get(), data, n) == 1; }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!ok_ || EVP_DigestFinal_ex(ctx_.get(), md, &len) != 1) return "";
    static const char kDigits[] = "0123456789abcdef";
    std::string out(2 * len, '0');
    for (unsigned int i = 0; i < len; ++i) {
      out[2 * i] = kDigits[md[i] >> 4];
      out[2 * i + 1] = kDigits[md[i] & 0xF];
    }
    return out;
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
  bool ok_ = false;
};

// ---- file helpers

class Fd {  // closes on scope exit
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, std::min(n, kChunk * 64));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    if (w == 0) {
      errno = EIO;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

ssize_t read_some(int fd, char* buf, size_t n) {
  ssize_t r;
  do {
    r = ::read(fd, buf, n);
  } while (r < 0 && errno == EINTR);
  return r;
}

// fsync of the directory makes a rename inside it durable; best effort (not every filesystem can).
void sync_parent_dir(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// ---- entry names

enum class NameIssue { kNone, kEscapes, kMalformed };

NameIssue classify_entry_name(std::string_view name) {
  if (name.empty() || name.size() > 0xFFFF || name.find('\0') != std::string_view::npos) return NameIssue::kMalformed;
  if (name.front() == '/' || name.find('\\') != std::string_view::npos) return NameIssue::kEscapes;
  if (name.size() >= 2 && name[1] == ':' && std::isalpha(static_cast<unsigned char>(name[0]))) {
    return NameIssue::kEscapes;  // "C:..." is absolute for Windows extractors
  }
  NameIssue issue = NameIssue::kNone;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(name.find('/', start), name.size());
    const std::string_view part = name.substr(start, end - start);
    if (part == "..") return NameIssue::kEscapes;
    if (part.empty() || part == ".") issue = NameIssue::kMalformed;
    if (end == name.size()) break;
    start = end + 1;
  }
  return issue;
}

// Bytes of alignment extra field so that data after a header ending at `header_end` starts on a
// kEntryAlignment boundary: 0, or at least kAlignExtraMin.
uint64_t align_padding(uint64_t header_end) {
  uint64_t pad = (kEntryAlignment - header_end % kEntryAlignment) % kEntryAlignment;
  if (pad != 0 && pad < kAlignExtraMin) pad += kEntryAlignment;
  return pad;
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  Sha256 sha;
  sha.update(data.data(), data.size());
  return sha.hex();
}

StatusOr<std::string> sha256_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return not_found("File not found: " + path);
    return errno_status("Cannot open " + in_quotes(path), errno);
  }
  Sha256 sha;
  std::string buf(kChunk, '\0');
  while (true) {
    const ssize_t r = read_some(fd.get(), buf.data(), buf.size());
    if (r < 0) return errno_status("Cannot read " + in_quotes(path), errno);
    if (r == 0) break;
    sha.update(buf.data(), static_cast<size_t>(r));
  }
  std::string hex = sha.hex();
  if (hex.empty()) return internal_error("OpenSSL SHA-256 failed for " + in_quotes(path));
  return hex;
}

// ================================================================================ ArchiveWriter

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
  if (fd_ < 0) return invalid_argument("Checkpoint writer for " + in_quotes(final_path_) + " is already finished");
  if (classify_entry_name(entry_name) != NameIssue::kNone) {
    return invalid_argument("Invalid checkpoint entry name " + in_quotes(entry_name) +
                            ": expected a relative '/'-separated path without '..', '.', empty parts or "
                            "backslashes");
  }
  if (entry_name == kManifestEntryName) {
    return invalid_argument("Entry name 'manifest.json' is reserved for the checkpoint manifest");
  }
  if (names_.count(entry_name) != 0) return invalid_argument("Duplicate checkpoint entry " + in_quotes(entry_name));
  return Status::Ok();
}

Status ArchiveWriter::add_file(std::string entry_name, std::string source_path) {
  AITUNE_RETURN_IF_ERROR(check_new_name(entry_name));
  Fd fd(::open(source_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return invalid_argument("Cannot read " + in_quotes(source_path) + " for checkpoint entry " + in_quotes(entry_name) +
                            ": " + std::strerror(errno));
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
  if (p.record.sha256.empty()) return internal_error("OpenSSL SHA-256 failed for " + in_quotes(p.source_path));
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
  if (p.record.sha256.empty()) return internal_error("OpenSSL SHA-256 failed for entry " + in_quotes(entry_name));
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

Status ArchiveWriter::finish(std::string_view manifest_json) {
  if (fd_ < 0) return invalid_argument("Checkpoint writer for " + in_quotes(final_path_) + " is already finished");
  const std::string where = "Cannot write checkpoint " + in_quotes(final_path_);
  auto fail = [this](Status s) {
    abandon();  // closes and removes the temp file; the writer is spent
    return s;
  };

  // Layout first: offsets, and which values need ZIP64 (zip64.h). The local header's ZIP64 field
  // (sizes only) comes before the alignment field, so the padding accounts for it.
  const bool force = options_.force_zip64;
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
  std::vector<Slot> slots;
  slots.reserve(pending_.size() + 1);
  slots.push_back({kManifestEntryName, manifest_json.size(),
                   crc32_update(0, manifest_json.data(), manifest_json.size())});
  for (const auto& p : pending_) slots.push_back({p.record.path, p.record.size, p.crc32});
  uint64_t offset = 0;
  uint64_t central_size = 0;
  for (auto& s : slots) {
    s.offset = offset;
    s.zip64_size = force || s.size >= kMax32;
    s.zip64_offset = force || s.offset >= kMax32;
    const uint64_t header = kLocalSize + s.name.size() + zip64::extra_size(s.local_extra());
    s.padding = align_padding(offset + header);
    offset += header + s.padding + s.size;
    central_size += kCentralSize + s.name.size() + zip64::extra_size(s.central_extra());
  }
  const uint64_t central_offset = offset;
  const bool zip64_end =
      force || slots.size() >= kMax16 || central_offset >= kMax32 || central_size >= kMax32;

  auto write_header = [&](const Slot& s) {
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
    return write_all(fd_, h.data(), h.size());
  };

  if (!write_header(slots[0]) || !write_all(fd_, manifest_json.data(), manifest_json.size())) {
    return fail(errno_status(where, errno));
  }
  std::string buf;
  for (size_t i = 0; i < pending_.size(); ++i) {
    const Pending& p = pending_[i];
    if (!write_header(slots[i + 1])) return fail(errno_status(where, errno));
    if (!p.from_file) {
      if (!write_all(fd_, p.bytes.data(), p.bytes.size())) return fail(errno_status(where, errno));
      continue;
    }
    // Streamed again; the CRC recorded at add time detects a file that changed in between.
    Fd src(::open(p.source_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (src.get() < 0) return fail(errno_status(where + ": cannot reopen " + in_quotes(p.source_path), errno));
    buf.resize(kChunk);
    uint64_t copied = 0;
    uint32_t crc = 0;
    while (true) {
      const ssize_t r = read_some(src.get(), buf.data(), buf.size());
      if (r < 0) return fail(errno_status(where + ": cannot read " + in_quotes(p.source_path), errno));
      if (r == 0) break;
      copied += static_cast<uint64_t>(r);
      if (copied > p.record.size) break;  // grew: reported below
      crc = crc32_update(crc, buf.data(), static_cast<size_t>(r));
      if (!write_all(fd_, buf.data(), static_cast<size_t>(r))) return fail(errno_status(where, errno));
    }
    if (copied != p.record.size || crc != p.crc32) {
      return fail(internal_error(where + ": " + in_quotes(p.source_path) + " (entry " + in_quotes(p.record.path) +
                                 ") changed after it was added; expected " + std::to_string(p.record.size) +
                                 " bytes as hashed then"));
    }
  }

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
  if (!write_all(fd_, central.data(), central.size()) || ::fsync(fd_) != 0) return fail(errno_status(where, errno));

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

// ================================================================================ ArchiveReader

struct ArchiveReader::State {
  struct Entry {
    std::string name;
    uint64_t header_offset;
    uint64_t data_offset;
    uint64_t size;
  };

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (base != nullptr) ::munmap(const_cast<unsigned char*>(base), size);
  }

  std::string_view view(const Entry& e) const {
    return {reinterpret_cast<const char*>(base) + e.data_offset, static_cast<size_t>(e.size)};
  }
  Status parse();

  std::string path;
  const unsigned char* base = nullptr;  // read-only private mapping of the whole file
  size_t size = 0;
  std::vector<Entry> entries;  // central-directory order; entries[0] is manifest.json
  std::unordered_map<std::string, size_t> index;
  std::string digest;

  std::mutex mu;                  // guards `hashes`
  std::vector<std::string> hashes;  // per entry: computed SHA-256, "" until first read
};

ArchiveReader::ArchiveReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
ArchiveReader::ArchiveReader(ArchiveReader&& other) noexcept = default;
ArchiveReader& ArchiveReader::operator=(ArchiveReader&& other) noexcept = default;
ArchiveReader::~ArchiveReader() = default;

StatusOr<ArchiveReader> ArchiveReader::open(std::string path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; fstat
  // below refuses anything that is not a regular file (the flag does not affect reading one).
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return not_found("Checkpoint file not found: " + path);
    return invalid_argument("Cannot open checkpoint " + in_quotes(path) + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_status("Cannot stat checkpoint " + in_quotes(path), errno);
  if (!S_ISREG(st.st_mode)) return invalid_argument("Checkpoint " + in_quotes(path) + " is not a regular file");
  auto state = std::make_unique<State>();
  state->path = std::move(path);
  if (static_cast<uint64_t>(st.st_size) < kEndSize) {
    return corrupt("Checkpoint " + in_quotes(state->path) + " is corrupt: truncated to " + std::to_string(st.st_size) +
                   " bytes, shorter than an empty ZIP archive");
  }
  state->size = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, state->size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (base == MAP_FAILED) return errno_status("Cannot memory-map checkpoint " + in_quotes(state->path), errno);
  state->base = static_cast<const unsigned char*>(base);
  AITUNE_RETURN_IF_ERROR(state->parse());
  return ArchiveReader(std::move(state));
}

Status ArchiveReader::State::parse() {
  const std::string bad = "Checkpoint " + in_quotes(path) + " is corrupt: ";
  const std::string odd = "Checkpoint " + in_quotes(path) + " uses an unsupported ZIP feature: ";
  // A zip64.h error (a message fragment) with this checkpoint's prefix and `where`.
  auto qualified = [&](const Status& s, const std::string& where) {
    return Status(s.code(), (s.code() == StatusCode::kUnsupported ? odd : bad) + where + s.message());
  };

  // End record: the last signature whose comment reaches exactly the end of the file.
  std::optional<uint64_t> found;
  const uint64_t lowest = size > kEndSize + 0xFFFF ? size - kEndSize - 0xFFFF : 0;
  for (uint64_t pos = size - kEndSize + 1; pos-- > lowest;) {
    if (get32(base + pos) == kEndSig && pos + kEndSize + get16(base + pos + 20) == size) {
      found = pos;
      break;
    }
  }
  if (!found) return corrupt(bad + "no end-of-central-directory record (truncated, or not a ZIP archive)");
  const uint64_t end = *found;
  const zip64::ClassicEnd classic{get16(base + end + 4),  get16(base + end + 6),  get16(base + end + 8),
                                  get16(base + end + 10), get32(base + end + 12), get32(base + end + 16)};
  uint64_t count = classic.count, central_size = classic.central_size,
           central_offset = classic.central_offset;
  uint64_t limit = end;  // the central directory ends at or before this record
  std::string limit_name = "the end record";
  if (end >= zip64::kLocatorSize && get32(base + end - zip64::kLocatorSize) == zip64::kLocatorSig) {
    const auto z = zip64::read_end(base, end - zip64::kLocatorSize, classic);
    if (!z.ok()) return qualified(z.status(), "");
    count = z->count;
    central_size = z->central_size;
    central_offset = z->central_offset;
    limit = z->record_offset;
    limit_name = "the ZIP64 end record";
  } else if (classic.disk != 0 || classic.central_disk != 0 || classic.count_disk != classic.count) {
    return unsupported(odd + "multi-disk archive");
  }
  if (central_offset > limit || central_size > limit - central_offset) {
    return corrupt(bad + "central directory (offset " + std::to_string(central_offset) + ", " +
                   std::to_string(central_size) + " bytes) extends past " + limit_name + " at " +
                   std::to_string(limit));
  }
  const uint64_t central_end = central_offset + central_size;
  if (count > central_size / kCentralSize) {
    return corrupt(bad + "the end record counts " + std::to_string(count) + " entries, more than a " +
                   std::to_string(central_size) + "-byte central directory holds");
  }

  struct Raw {
    std::string name;
    uint16_t made_by, flags, method, disk_start;
    uint32_t crc, csize, usize, attributes, local_offset;
    const unsigned char* extra;
    uint16_t extra_size;
  };
  std::vector<Raw> raws;
  raws.reserve(count);
  uint64_t p = central_offset;
  for (uint64_t i = 0; i < count; ++i) {
    if (p + kCentralSize > central_end) return corrupt(bad + "central directory is truncated");
    const unsigned char* h = base + p;
    if (get32(h) != kCentralSig) return corrupt(bad + "bad central directory signature at offset " + std::to_string(p));
    const uint64_t record = kCentralSize + get16(h + 28) + get16(h + 30) + get16(h + 32);
    if (p + record > central_end) return corrupt(bad + "central directory is truncated");
    raws.push_back({std::string(reinterpret_cast<const char*>(h + kCentralSize), get16(h + 28)), get16(h + 4),
                    get16(h + 8), get16(h + 10), get16(h + 34), get32(h + 16), get32(h + 20), get32(h + 24),
                    get32(h + 38), get32(h + 42), h + kCentralSize + get16(h + 28), get16(h + 30)});
    p += record;
  }
  if (p != central_end) return corrupt(bad + "central directory has " + std::to_string(central_end - p) + " bytes after its last entry");

  // A pre-aitune checkpoint (docs/reference/checkpoint.md#integrity-and-compatibility) holds a pickle; say so
  // instead of "corrupt".
  const bool has_manifest =
      std::any_of(raws.begin(), raws.end(), [](const Raw& r) { return r.name == kManifestEntryName; });
  const bool has_pickle = std::any_of(raws.begin(), raws.end(), [](const Raw& r) {
    return r.name == "state_dict.pt" || (r.name.size() > 14 && r.name.ends_with("/state_dict.pt"));
  });
  if (!has_manifest && has_pickle) {
    return unsupported("Checkpoint " + in_quotes(path) +
                       " is in the reference (pre-aitune) format: its state_dict.pt is a pickle, which can run "
                       "arbitrary code when loaded, so it is refused. Re-tune the model with aitune and save again.");
  }
  // The one refusal of a pickle beside a manifest: every reader (ait.load, the C++ runtime, the
  // CLI) opens the archive here first.
  if (has_pickle) {
    return unsupported(path + " is a checkpoint of the reference implementation: it stores a pickled state "
                              "that would execute code when loaded, so aitune refuses it. Re-tune the model and "
                              "save it with aitune.");
  }

  entries.reserve(raws.size());
  for (const Raw& r : raws) {
    const NameIssue issue = classify_entry_name(r.name);
    const bool unix_host = (r.made_by >> 8) == 3;
    if (issue == NameIssue::kEscapes || (unix_host && S_ISLNK(r.attributes >> 16))) return escapes(r.name);
    if (issue == NameIssue::kMalformed) return corrupt(bad + "entry name " + in_quotes(r.name) + " is not a normalised relative path");
    const std::string entry = "entry " + in_quotes(r.name);
    if (r.flags & (kFlagEncrypted | kFlagStrongEncryption)) return unsupported(odd + entry + " is encrypted");
    if (r.method != 0) {
      return unsupported(odd + entry + " is compressed (method " + std::to_string(r.method) +
                         "); aitune stores entries uncompressed so they can be memory-mapped");
    }
    if (r.flags & kFlagDataDescriptor) return unsupported(odd + entry + " uses a data descriptor");
    // ZIP64 (APPNOTE 4.5.3): each field at its sentinel is in the ZIP64 extra field, and only those.
    const auto z = zip64::read_extra(r.extra, r.extra_size,
                                     {.usize = r.usize == kMax32,
                                      .csize = r.csize == kMax32,
                                      .offset = r.local_offset == kMax32,
                                      .disk = r.disk_start == kMax16});
    if (!z.ok()) return qualified(z.status(), entry + " (central directory): ");
    const uint64_t usize = z->usize.value_or(r.usize), csize = z->csize.value_or(r.csize);
    const uint64_t off = z->offset.value_or(r.local_offset);
    if (z->disk.value_or(r.disk_start) != 0) return unsupported(odd + "multi-disk archive (" + entry + ")");
    if (csize != usize) {
      return corrupt(bad + entry + " is stored but its sizes differ (compressed " + std::to_string(csize) +
                     ", original " + std::to_string(usize) + ")");
    }
    if (index.count(r.name) != 0) return corrupt(bad + entry + " appears twice");

    if (off > central_offset || central_offset - off < kLocalSize) {
      return corrupt(bad + entry + ": local header offset " + std::to_string(off) +
                     " lies beyond the entry area, which ends at " + std::to_string(central_offset));
    }
    const unsigned char* h = base + off;
    if (get32(h) != kLocalSig) return corrupt(bad + entry + ": bad local header signature at offset " + std::to_string(off));
    const uint16_t lflags = get16(h + 6), lmethod = get16(h + 8), lname = get16(h + 26), lextra = get16(h + 28);
    if (lmethod != 0) return unsupported(odd + entry + " is compressed in its local header");
    if (lflags & (kFlagDataDescriptor | kFlagEncrypted | kFlagStrongEncryption)) {
      return unsupported(odd + entry + " uses a data descriptor or encryption");
    }
    const uint64_t data_offset = off + kLocalSize + lname + lextra;
    if (data_offset > central_offset) return corrupt(bad + entry + ": local header lies beyond the entry area");
    if (std::string_view(reinterpret_cast<const char*>(h + kLocalSize), lname) != r.name) {
      return corrupt(bad + entry + ": the local header names a different entry");
    }
    const uint32_t local_csize = get32(h + 18), local_usize = get32(h + 22);
    const auto lz = zip64::read_extra(h + kLocalSize + lname, lextra,
                                      {.usize = local_usize == kMax32, .csize = local_csize == kMax32});
    if (!lz.ok()) return qualified(lz.status(), entry + " (local header): ");
    if (lz->csize.value_or(local_csize) != csize || lz->usize.value_or(local_usize) != usize) {
      return corrupt(bad + entry + ": local and central sizes differ (local " +
                     std::to_string(lz->csize.value_or(local_csize)) + "/" +
                     std::to_string(lz->usize.value_or(local_usize)) + ", central " + std::to_string(csize) +
                     "/" + std::to_string(usize) + " compressed/original bytes)");
    }
    if (usize > central_offset - data_offset) {
      return corrupt(bad + entry + ": data (" + std::to_string(usize) + " bytes at offset " +
                     std::to_string(data_offset) + ") extends past the entry area");
    }
    index.emplace(r.name, entries.size());
    entries.push_back({r.name, off, data_offset, usize});
  }

  std::vector<const Entry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->header_offset < b->header_offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Entry& a = *by_offset[i - 1];
    const Entry& b = *by_offset[i];
    if (a.data_offset + a.size > b.header_offset) {
      return corrupt(bad + "entries " + in_quotes(a.name) + " and " + in_quotes(b.name) + " overlap");
    }
  }
  if (entries.empty() || entries[0].name != kManifestEntryName || entries[0].header_offset != 0) {
    return corrupt(bad + (has_manifest ? "manifest.json is not the first entry" : "it has no manifest.json"));
  }
  // Every other entry is checked by its SHA-256 in the manifest; the manifest itself only by
  // the CRC-32 the ZIP records for it, so a damaged manifest is refused here, not parsed.
  const auto manifest_raw = std::find_if(raws.begin(), raws.end(), [](const Raw& r) { return r.name == kManifestEntryName; });
  const std::string_view manifest = view(entries[0]);
  if (crc32_update(0, manifest.data(), manifest.size()) != manifest_raw->crc) {
    return corrupt(bad + "manifest.json does not match its CRC-32 (the manifest is damaged)");
  }
  digest = sha256_hex(manifest);
  hashes.resize(entries.size());
  return Status::Ok();
}

const std::string& ArchiveReader::path() const { return state_->path; }

std::string_view ArchiveReader::manifest_bytes() const { return state_->view(state_->entries[0]); }

std::string ArchiveReader::digest() const { return state_->digest; }

std::vector<std::string> ArchiveReader::entry_names() const {
  std::vector<std::string> out;
  out.reserve(state_->entries.size());
  for (const auto& e : state_->entries) out.push_back(e.name);
  return out;
}

std::optional<uint64_t> ArchiveReader::entry_size(const std::string& name) const {
  const auto it = state_->index.find(name);
  if (it == state_->index.end()) return std::nullopt;
  return state_->entries[it->second].size;
}

Status ArchiveReader::check_listed(const std::vector<FileRecord>& listed) const {
  std::unordered_map<std::string_view, uint64_t> sizes;
  for (const auto& r : listed) sizes.emplace(r.path, r.size);
  for (const auto& e : state_->entries) {
    if (e.name != kManifestEntryName && sizes.count(e.name) == 0) {
      return corrupt("Entry " + in_quotes(e.name) + " is not listed in the manifest");
    }
  }
  std::vector<std::string> failed;
  for (const auto& r : listed) {
    const auto size = entry_size(r.path);
    if (!size || *size != r.size) failed.push_back(r.path);
  }
  if (!failed.empty()) return hash_failure(failed);
  return Status::Ok();
}

StatusOr<std::string_view> ArchiveReader::read(const std::string& name, const FileRecord& expected) const {
  const auto it = state_->index.find(name);
  if (it == state_->index.end()) return hash_failure({name});
  const State::Entry& e = state_->entries[it->second];
  if (e.size != expected.size) return hash_failure({name});
  const std::string_view data = state_->view(e);
  std::string actual;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    actual = state_->hashes[it->second];
  }
  if (actual.empty()) {
    // Hashed outside the lock so other entries can be read meanwhile; two threads reading the
    // same new entry both hash it once and store the same value.
    actual = sha256_hex(data);
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->hashes[it->second] = actual;
  }
  std::string want = expected.sha256;
  std::transform(want.begin(), want.end(), want.begin(), [](unsigned char c) { return std::tolower(c); });
  if (actual.empty() || actual != want) return hash_failure({name});
  return data;
}

Status ArchiveReader::extract(const std::string& name, const FileRecord& expected, const std::string& dest_path) const {
  AITUNE_ASSIGN_OR_RETURN(const std::string_view data, read(name, expected));
  const std::string where = "Cannot extract checkpoint entry " + in_quotes(name) + " to " + in_quotes(dest_path);
  const std::filesystem::path parent = std::filesystem::path(dest_path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) return internal_error(where + ": " + ec.message());
  }
  static std::atomic<uint64_t> counter{0};  // temp names unique across threads of this process
  const std::string temp = dest_path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status(where, errno);
  int err = 0;
  if (!write_all(fd, data.data(), data.size()) || ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(temp.c_str(), dest_path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    return errno_status(where, err);
  }
  return Status::Ok();
}

}  // namespace aitune
