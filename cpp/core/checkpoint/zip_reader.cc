// ArchiveReader (zip_archive.h): maps the archive read-only, validates its whole structure on open,
// verifies entries lazily.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include "checkpoint/crc32.h"
#include "checkpoint/entry_name.h"
#include "checkpoint/posix_file.h"
#include "checkpoint/sha256.h"
#include "checkpoint/zip_archive.h"
#include "checkpoint/zip_format.h"

namespace aitune {

using namespace zip;  // the record layout and file helpers (zip_format.h, posix_file.h, entry_name.h)

namespace {

// The docs/reference/checkpoint.md#integrity-and-compatibility message, with a Python-style list so it reads
// the same as the Python layer's.
Status hash_failure(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + in_quotes(n);
  return corrupt("Failed to verify SHA hashes for files: [" + list + "]");
}

}  // namespace

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
  // The central directory's place and size, from the end record (or the ZIP64 one).
  struct Directory {
    uint64_t count, offset, size;
  };
  // One central-directory record, before it is checked against its local header.
  struct Raw {
    std::string name;
    uint16_t made_by, flags, method, disk_start;
    uint32_t crc, csize, usize, attributes, local_offset;
    const unsigned char* extra;
    uint16_t extra_size;
  };

  // Validates the whole structure and fills `entries`, `index` and `digest` (the steps below).
  Status parse();
  StatusOr<Directory> find_directory() const;
  StatusOr<std::vector<Raw>> read_directory(const Directory& dir) const;
  Status refuse_pickles(const std::vector<Raw>& raws) const;
  Status add_entry(const Raw& r, uint64_t central_offset);
  Status check_layout(const std::vector<Raw>& raws);
  // Message prefixes naming this checkpoint, and a zip64.h error (a fragment) qualified by them.
  std::string bad() const { return "Checkpoint " + in_quotes(path) + " is corrupt: "; }
  std::string odd() const { return "Checkpoint " + in_quotes(path) + " uses an unsupported ZIP feature: "; }
  Status qualified(const Status& s, const std::string& where) const {
    return Status(s.code(), (s.code() == StatusCode::kUnsupported ? odd() : bad()) + where + s.message());
  }

  std::string path;
  const unsigned char* base = nullptr;  // read-only private mapping of the whole file
  size_t size = 0;
  std::vector<Entry> entries;  // central-directory order; entries[0] is manifest.json
  std::unordered_map<std::string, size_t> index;
  std::string digest;

  std::mutex mu;                    // guards `hashes`
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
  if (!S_ISREG(st.st_mode))
    return invalid_argument("Checkpoint " + in_quotes(path) + " is not a regular file");
  auto state = std::make_unique<State>();
  state->path = std::move(path);
  if (static_cast<uint64_t>(st.st_size) < kEndSize) {
    return corrupt("Checkpoint " + in_quotes(state->path) + " is corrupt: truncated to " +
                   std::to_string(st.st_size) + " bytes, shorter than an empty ZIP archive");
  }
  state->size = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, state->size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (base == MAP_FAILED)
    return errno_status("Cannot memory-map checkpoint " + in_quotes(state->path), errno);
  state->base = static_cast<const unsigned char*>(base);
  AITUNE_RETURN_IF_ERROR(state->parse());
  return ArchiveReader(std::move(state));
}

Status ArchiveReader::State::parse() {
  AITUNE_ASSIGN_OR_RETURN(const Directory dir, find_directory());
  AITUNE_ASSIGN_OR_RETURN(const std::vector<Raw> raws, read_directory(dir));
  AITUNE_RETURN_IF_ERROR(refuse_pickles(raws));
  entries.reserve(raws.size());
  for (const Raw& r : raws) AITUNE_RETURN_IF_ERROR(add_entry(r, dir.offset));
  return check_layout(raws);
}

// End record: the last signature whose comment reaches exactly the end of the file.
StatusOr<ArchiveReader::State::Directory> ArchiveReader::State::find_directory() const {
  std::optional<uint64_t> found;
  const uint64_t lowest = size > kEndSize + 0xFFFF ? size - kEndSize - 0xFFFF : 0;
  for (uint64_t pos = size - kEndSize + 1; pos-- > lowest;) {
    if (get32(base + pos) == kEndSig && pos + kEndSize + get16(base + pos + 20) == size) {
      found = pos;
      break;
    }
  }
  if (!found) return corrupt(bad() + "no end-of-central-directory record (truncated, or not a ZIP archive)");
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
    return unsupported(odd() + "multi-disk archive");
  }
  if (central_offset > limit || central_size > limit - central_offset) {
    return corrupt(bad() + "central directory (offset " + std::to_string(central_offset) + ", " +
                   std::to_string(central_size) + " bytes) extends past " + limit_name + " at " +
                   std::to_string(limit));
  }
  if (count > central_size / kCentralSize) {
    return corrupt(bad() + "the end record counts " + std::to_string(count) + " entries, more than a " +
                   std::to_string(central_size) + "-byte central directory holds");
  }
  return Directory{count, central_offset, central_size};
}

StatusOr<std::vector<ArchiveReader::State::Raw>> ArchiveReader::State::read_directory(
    const Directory& dir) const {
  const uint64_t central_offset = dir.offset, central_end = dir.offset + dir.size, count = dir.count;
  std::vector<Raw> raws;
  raws.reserve(count);
  uint64_t p = central_offset;
  for (uint64_t i = 0; i < count; ++i) {
    if (p + kCentralSize > central_end) return corrupt(bad() + "central directory is truncated");
    const unsigned char* h = base + p;
    if (get32(h) != kCentralSig)
      return corrupt(bad() + "bad central directory signature at offset " + std::to_string(p));
    const uint64_t record = kCentralSize + get16(h + 28) + get16(h + 30) + get16(h + 32);
    if (p + record > central_end) return corrupt(bad() + "central directory is truncated");
    raws.push_back({std::string(reinterpret_cast<const char*>(h + kCentralSize), get16(h + 28)), get16(h + 4),
                    get16(h + 8), get16(h + 10), get16(h + 34), get32(h + 16), get32(h + 20), get32(h + 24),
                    get32(h + 38), get32(h + 42), h + kCentralSize + get16(h + 28), get16(h + 30)});
    p += record;
  }
  if (p != central_end)
    return corrupt(bad() + "central directory has " + std::to_string(central_end - p) +
                   " bytes after its last entry");
  return raws;
}

// A pre-aitune checkpoint (docs/reference/checkpoint.md#integrity-and-compatibility) holds a pickle; say so
// instead of "corrupt".
Status ArchiveReader::State::refuse_pickles(const std::vector<Raw>& raws) const {
  const bool has_manifest =
      std::any_of(raws.begin(), raws.end(), [](const Raw& r) { return r.name == kManifestEntryName; });
  const bool has_pickle = std::any_of(raws.begin(), raws.end(), [](const Raw& r) {
    return r.name == "state_dict.pt" || (r.name.size() > 14 && r.name.ends_with("/state_dict.pt"));
  });
  if (!has_manifest && has_pickle) {
    return unsupported(
        "Checkpoint " + in_quotes(path) +
        " is in the reference (pre-aitune) format: its state_dict.pt is a pickle, which can run "
        "arbitrary code when loaded, so it is refused. Re-tune the model with aitune and save again.");
  }
  // The one refusal of a pickle beside a manifest: every reader (ait.load, the C++ runtime, the
  // CLI) opens the archive here first.
  if (has_pickle) {
    return unsupported(path +
                       " is a checkpoint of the reference implementation: it stores a pickled state "
                       "that would execute code when loaded, so aitune refuses it. Re-tune the model and "
                       "save it with aitune.");
  }
  return Status::Ok();
}

// Checks one entry against its local header and the entry area (which ends where the central
// directory starts), and adds it.
Status ArchiveReader::State::add_entry(const Raw& r, uint64_t central_offset) {
  const NameIssue issue = classify_entry_name(r.name);
  const bool unix_host = (r.made_by >> 8) == 3;
  if (issue == NameIssue::kEscapes || (unix_host && S_ISLNK(r.attributes >> 16))) return escapes(r.name);
  if (issue == NameIssue::kMalformed)
    return corrupt(bad() + "entry name " + in_quotes(r.name) + " is not a normalised relative path");
  const std::string entry = "entry " + in_quotes(r.name);
  if (r.flags & (kFlagEncrypted | kFlagStrongEncryption)) return unsupported(odd() + entry + " is encrypted");
  if (r.method != 0) {
    return unsupported(odd() + entry + " is compressed (method " + std::to_string(r.method) +
                       "); aitune stores entries uncompressed so they can be memory-mapped");
  }
  if (r.flags & kFlagDataDescriptor) return unsupported(odd() + entry + " uses a data descriptor");
  // ZIP64 (APPNOTE 4.5.3): each field at its sentinel is in the ZIP64 extra field, and only those.
  const auto z = zip64::read_extra(r.extra, r.extra_size,
                                   {.usize = r.usize == kMax32,
                                    .csize = r.csize == kMax32,
                                    .offset = r.local_offset == kMax32,
                                    .disk = r.disk_start == kMax16});
  if (!z.ok()) return qualified(z.status(), entry + " (central directory): ");
  const uint64_t usize = z->usize.value_or(r.usize), csize = z->csize.value_or(r.csize);
  const uint64_t off = z->offset.value_or(r.local_offset);
  if (z->disk.value_or(r.disk_start) != 0) return unsupported(odd() + "multi-disk archive (" + entry + ")");
  if (csize != usize) {
    return corrupt(bad() + entry + " is stored but its sizes differ (compressed " + std::to_string(csize) +
                   ", original " + std::to_string(usize) + ")");
  }
  if (index.count(r.name) != 0) return corrupt(bad() + entry + " appears twice");

  if (off > central_offset || central_offset - off < kLocalSize) {
    return corrupt(bad() + entry + ": local header offset " + std::to_string(off) +
                   " lies beyond the entry area, which ends at " + std::to_string(central_offset));
  }
  const unsigned char* h = base + off;
  if (get32(h) != kLocalSig)
    return corrupt(bad() + entry + ": bad local header signature at offset " + std::to_string(off));
  const uint16_t lflags = get16(h + 6), lmethod = get16(h + 8), lname = get16(h + 26), lextra = get16(h + 28);
  if (lmethod != 0) return unsupported(odd() + entry + " is compressed in its local header");
  if (lflags & (kFlagDataDescriptor | kFlagEncrypted | kFlagStrongEncryption)) {
    return unsupported(odd() + entry + " uses a data descriptor or encryption");
  }
  const uint64_t data_offset = off + kLocalSize + lname + lextra;
  if (data_offset > central_offset)
    return corrupt(bad() + entry + ": local header lies beyond the entry area");
  if (std::string_view(reinterpret_cast<const char*>(h + kLocalSize), lname) != r.name) {
    return corrupt(bad() + entry + ": the local header names a different entry");
  }
  const uint32_t local_csize = get32(h + 18), local_usize = get32(h + 22);
  const auto lz = zip64::read_extra(h + kLocalSize + lname, lextra,
                                    {.usize = local_usize == kMax32, .csize = local_csize == kMax32});
  if (!lz.ok()) return qualified(lz.status(), entry + " (local header): ");
  if (lz->csize.value_or(local_csize) != csize || lz->usize.value_or(local_usize) != usize) {
    return corrupt(bad() + entry + ": local and central sizes differ (local " +
                   std::to_string(lz->csize.value_or(local_csize)) + "/" +
                   std::to_string(lz->usize.value_or(local_usize)) + ", central " + std::to_string(csize) +
                   "/" + std::to_string(usize) + " compressed/original bytes)");
  }
  if (usize > central_offset - data_offset) {
    return corrupt(bad() + entry + ": data (" + std::to_string(usize) + " bytes at offset " +
                   std::to_string(data_offset) + ") extends past the entry area");
  }
  index.emplace(r.name, entries.size());
  entries.push_back({r.name, off, data_offset, usize});
  return Status::Ok();
}

// No two entries overlap, manifest.json comes first, and it matches its CRC-32.
Status ArchiveReader::State::check_layout(const std::vector<Raw>& raws) {
  const bool has_manifest =
      std::any_of(raws.begin(), raws.end(), [](const Raw& r) { return r.name == kManifestEntryName; });
  std::vector<const Entry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->header_offset < b->header_offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Entry& a = *by_offset[i - 1];
    const Entry& b = *by_offset[i];
    if (a.data_offset + a.size > b.header_offset) {
      return corrupt(bad() + "entries " + in_quotes(a.name) + " and " + in_quotes(b.name) + " overlap");
    }
  }
  if (entries.empty() || entries[0].name != kManifestEntryName || entries[0].header_offset != 0) {
    return corrupt(bad() +
                   (has_manifest ? "manifest.json is not the first entry" : "it has no manifest.json"));
  }
  // Every other entry is checked by its SHA-256 in the manifest; the manifest itself only by
  // the CRC-32 the ZIP records for it, so a damaged manifest is refused here, not parsed.
  const auto manifest_raw =
      std::find_if(raws.begin(), raws.end(), [](const Raw& r) { return r.name == kManifestEntryName; });
  const std::string_view manifest = view(entries[0]);
  if (crc32_update(0, manifest.data(), manifest.size()) != manifest_raw->crc) {
    return corrupt(bad() + "manifest.json does not match its CRC-32 (the manifest is damaged)");
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

Status ArchiveReader::extract(const std::string& name, const FileRecord& expected,
                              const std::string& dest_path) const {
  AITUNE_ASSIGN_OR_RETURN(const std::string_view data, read(name, expected));
  const std::string where =
      "Cannot extract checkpoint entry " + in_quotes(name) + " to " + in_quotes(dest_path);
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
