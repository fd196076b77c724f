#include "checkpoint/extraction_cache.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "checkpoint/entry_name.h"

namespace aitune {
namespace {

namespace fs = std::filesystem;

// Holds an exclusive flock until destroyed (or nothing, for a read-only cache whose lock file
// cannot be created: nobody can write there, so there is nothing to serialise). Separate open()
// calls get separate open file descriptions, so the lock also serialises threads of one process.
class ExclusiveLock {
 public:
  static StatusOr<ExclusiveLock> acquire(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // read-only cache: an existing lock file
    if (fd < 0) return ExclusiveLock(-1);
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int err = errno;
      ::close(fd);
      return internal_error("Cannot lock '" + path + "': " + std::strerror(err));
    }
    return ExclusiveLock(fd);
  }
  ExclusiveLock(ExclusiveLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ExclusiveLock& operator=(ExclusiveLock&&) = delete;
  ExclusiveLock(const ExclusiveLock&) = delete;
  ~ExclusiveLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  explicit ExclusiveLock(int fd) : fd_(fd) {}
  int fd_;
};

// The marker names the archive the folder belongs to. Which files a load needs differs (the C++
// runtime extracts only AOT artifacts, Python every path artifact), so files are checked one by
// one against the records, and a load adds the ones an earlier load did not extract.
std::string marker_text(const std::string& digest) { return digest + "\n"; }

bool marker_names(const std::string& marker, const std::string& digest) {
  return marker.compare(0, digest.size() + 1, digest + "\n") == 0;  // older markers add a count line
}

// Deletes `dir` and everything below it, not following symlinks; a missing `dir` is fine.
// Hand-written on nftw(3) rather than std::filesystem::remove_all: libtorch.so (torch 2.11 wheels)
// exports its own remove_all whose recursion calls a weak symbol that today's libstdc++ lacks, and
// a process that binds to that copy crashes on a null call (seen with the CLI on the GPU image).
Status remove_tree(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return internal_error("Cannot clear '" + dir + "': " + std::strerror(errno));
  }
  static thread_local int first_error;
  first_error = 0;
  const auto remove_entry = [](const char* path, const struct stat*, int, struct FTW*) -> int {
    if (::remove(path) != 0 && errno != ENOENT && first_error == 0) first_error = errno;
    return 0;  // keep going: remove as much as possible, report the first failure
  };
  if (::nftw(dir.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && first_error == 0)
    first_error = errno;
  if (first_error != 0) return internal_error("Cannot clear '" + dir + "': " + std::strerror(first_error));
  return Status::Ok();
}

bool read_small_file(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[256];
  out.clear();
  ssize_t r;
  while ((r = ::read(fd, buf, sizeof(buf))) > 0 && out.size() < 4096) out.append(buf, static_cast<size_t>(r));
  ::close(fd);
  return r == 0;
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A cheap identity of an extracted file: any write to it changes its ctime (which no user can
// set back), a replacement changes its inode. Recorded in `.stamps` when the file is verified, so
// a later load knows, without hashing hundreds of megabytes, that the bytes are the ones whose
// SHA-256 was checked -- a changed byte of a cached .so would otherwise be mapped as native code.
std::string stamp_of(const struct stat& st) {
  return std::to_string(st.st_size) + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_dev) +
         " " + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " " +
         std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
}

// `.stamps`: one "<stamp>\t<entry path>" line per verified file.
using Stamps = std::map<std::string, std::string>;  // entry path -> stamp

Stamps read_stamps(const std::string& path) {
  Stamps out;
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t r;
  while ((r = ::read(fd, buf, sizeof(buf))) > 0 && text.size() < (16u << 20))
    text.append(buf, static_cast<size_t>(r));
  ::close(fd);
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) out[line.substr(tab + 1)] = line.substr(0, tab);
    start = end + 1;
  }
  return out;
}

// True when `path` holds the entry `f`: its stamp is the recorded one (fast), or its SHA-256 is
// the entry's (verify_full, or no matching stamp). `stamp` receives the file's current stamp.
bool is_valid_file(const std::string& path, const FileRecord& f, bool verify_full, const Stamps& stamps,
                   std::string* stamp) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) != f.size) {
    return false;
  }
  *stamp = stamp_of(st);
  const auto known = stamps.find(f.path);
  if (!verify_full && known != stamps.end() && known->second == *stamp) return true;
  auto hash = sha256_file(path);
  return hash.ok() && *hash == lowercase(f.sha256);
}

Status write_marker(const std::string& path, const std::string& text) {
  static std::atomic<uint64_t> counter{0};
  const std::string temp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return internal_error("Cannot write '" + temp + "': " + std::strerror(errno));
  const bool ok =
      ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : err;
    ::unlink(temp.c_str());
    return internal_error("Cannot write '" + path + "': " + std::strerror(e));
  }
  return Status::Ok();
}

Status write_stamps(const std::string& path, const Stamps& stamps) {
  std::string text;
  for (const auto& [entry, stamp] : stamps) text += stamp + "\t" + entry + "\n";
  return write_marker(path, text);
}

// The error for a cache folder aitune cannot write: says what to do about it.
Status read_only_or(const std::string& dir, const std::string& message) {
  if (::access(dir.c_str(), W_OK) != 0 || ::access(fs::path(dir).parent_path().c_str(), W_OK) != 0) {
    return internal_error(message +
                          ". The extraction cache is not writable and does not hold this checkpoint's "
                          "files yet: set AITUNE_CACHE_DIR (or config.cache_dir) to a writable folder");
  }
  return internal_error(message);
}

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

StatusOr<std::string> extract_all(const ArchiveReader& reader, const std::vector<FileRecord>& files,
                                  const std::string& cache_root, bool verify_full) {
  AITUNE_CHECK_ARG(!cache_root.empty(), "Extraction cache root must not be empty");
  for (const auto& f : files) {
    // The schema refuses these names already (schema_rules.cc check_files); a second guard for
    // callers that pass records of their own.
    if (zip::is_reserved_entry_name(f.path)) {
      return Status(StatusCode::kCorrupt,
                    "Checkpoint entry '" + f.path + "' clashes with the extraction cache's own files");
    }
  }
  std::error_code ec;
  fs::create_directories(cache_root, ec);
  if (ec && !fs::is_directory(cache_root)) {
    return internal_error("Cannot create extraction cache '" + cache_root + "': " + ec.message());
  }

  const std::string digest = reader.digest();
  const std::string dir = (fs::path(cache_root) / digest).string();
  AITUNE_ASSIGN_OR_RETURN(ExclusiveLock lock, ExclusiveLock::acquire(dir + ".lock"));
  const std::string stamps_path = dir + "/" + kExtractionStamps;
  std::string marker;
  const bool owned = read_small_file(dir + "/" + kExtractionMarker, marker) && marker_names(marker, digest);
  const Stamps stamps = owned ? read_stamps(stamps_path) : Stamps{};
  Stamps fresh = stamps;
  std::vector<const FileRecord*> missing;
  for (const auto& f : files) {
    // Entry names were validated by ArchiveReader::open, and read() accepts only real entries,
    // so `dir / f.path` stays inside `dir`.
    std::string stamp;
    if (owned && is_valid_file(dir + "/" + f.path, f, verify_full, stamps, &stamp)) {
      fresh[f.path] = stamp;
    } else {
      missing.push_back(&f);
    }
  }
  if (owned && missing.empty()) {
    if (fresh != stamps)
      (void)write_stamps(stamps_path, fresh);  // best effort: a read-only cache still serves
    return dir;
  }
  if (!owned) {
    // A miss, an interrupted first extraction or a foreign folder: start from an empty folder.
    if (Status s = remove_tree(dir); !s.ok()) return read_only_or(dir, s.message());
    fs::create_directories(dir, ec);
    if (ec) return read_only_or(dir, "Cannot create extraction folder '" + dir + "': " + ec.message());
    fresh.clear();
  }
  for (const FileRecord* f : missing) {
    // Each file is written to a temporary name and renamed, so a present file is a finished one;
    // a damaged one is replaced alone. extract() verifies the entry's SHA-256 first.
    const std::string path = dir + "/" + f->path;
    const Status s = reader.extract(f->path, *f, path);
    if (!s.ok()) return s.code() == StatusCode::kCorrupt ? s : read_only_or(dir, s.message());
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) fresh[f->path] = stamp_of(st);
  }
  if (Status s = write_stamps(stamps_path, fresh); !s.ok()) return read_only_or(dir, s.message());
  if (!owned) {
    if (Status s = write_marker(dir + "/" + kExtractionMarker, marker_text(digest)); !s.ok()) {
      return read_only_or(dir, s.message());
    }
  }
  sync_dir(dir);
  return dir;
}

}  // namespace aitune
