#include "checkpoint/extraction_cache.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace aitune {
namespace {

namespace fs = std::filesystem;

// Holds an exclusive flock until destroyed. Separate open() calls get separate open file
// descriptions, so the lock also serialises threads of one process.
class ExclusiveLock {
 public:
  static StatusOr<ExclusiveLock> acquire(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return internal_error("Cannot open lock file '" + path + "': " + std::strerror(errno));
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
// a process that binds to that copy crashes on a null call (the CLI on the H200 image, 2026-11-30).
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
  if (::nftw(dir.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && first_error == 0) first_error = errno;
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

// True when `path` holds the entry `f` (its size; with verify_full also its SHA-256).
bool is_valid_file(const std::string& path, const FileRecord& f, bool verify_full) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != f.size) {
    return false;
  }
  if (!verify_full) return true;
  auto hash = sha256_file(path);
  return hash.ok() && *hash == lowercase(f.sha256);
}

Status write_marker(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return internal_error("Cannot write '" + temp + "': " + std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : err;
    ::unlink(temp.c_str());
    return internal_error("Cannot write '" + path + "': " + std::strerror(e));
  }
  return Status::Ok();
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
    AITUNE_CHECK_ARG(f.path != kExtractionMarker,
                     std::string("Checkpoint entry '") + kExtractionMarker + "' clashes with the extraction marker");
  }
  std::error_code ec;
  fs::create_directories(cache_root, ec);
  if (ec) return internal_error("Cannot create extraction cache '" + cache_root + "': " + ec.message());

  const std::string digest = reader.digest();
  const std::string dir = (fs::path(cache_root) / digest).string();
  AITUNE_ASSIGN_OR_RETURN(ExclusiveLock lock, ExclusiveLock::acquire(dir + ".lock"));
  std::string marker;
  const bool owned = read_small_file(dir + "/" + kExtractionMarker, marker) && marker_names(marker, digest);
  if (!owned) {
    // A miss, an interrupted first extraction or a foreign folder: start from an empty folder.
    AITUNE_RETURN_IF_ERROR(remove_tree(dir));
    fs::create_directories(dir, ec);
    if (ec) return internal_error("Cannot create extraction folder '" + dir + "': " + ec.message());
  }
  bool wrote = false;
  for (const auto& f : files) {
    // Entry names were validated by ArchiveReader::open, and read() accepts only real entries,
    // so `dir / f.path` stays inside `dir`. Each file is written to a temporary name and renamed,
    // so a present file of the right size is a finished one; a damaged one is replaced alone.
    const std::string path = dir + "/" + f.path;
    if (owned && is_valid_file(path, f, verify_full)) continue;
    AITUNE_RETURN_IF_ERROR(reader.extract(f.path, f, path));
    wrote = true;
  }
  if (!owned) AITUNE_RETURN_IF_ERROR(write_marker(dir + "/" + kExtractionMarker, marker_text(digest)));
  if (wrote || !owned) sync_dir(dir);
  return dir;
}

}  // namespace aitune
