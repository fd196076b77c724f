#include "checkpoint/extraction_cache.h"

#include <fcntl.h>
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

// The marker names the archive and the file count, so a marker left by another layout never
// passes for this one.
std::string marker_text(const std::string& digest, size_t file_count) {
  return digest + "\n" + std::to_string(file_count) + "\n";
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

// True when `dir` is a complete extraction of `files`.
bool is_valid_hit(const std::string& dir, const std::string& digest, const std::vector<FileRecord>& files,
                  bool verify_full) {
  std::string marker;
  if (!read_small_file(dir + "/" + kExtractionMarker, marker) || marker != marker_text(digest, files.size())) {
    return false;
  }
  for (const auto& f : files) {
    const std::string path = dir + "/" + f.path;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != f.size) {
      return false;
    }
    if (verify_full) {
      auto hash = sha256_file(path);
      if (!hash.ok() || *hash != lowercase(f.sha256)) return false;
    }
  }
  return true;
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
  if (is_valid_hit(dir, digest, files, verify_full)) return dir;

  // Miss, an interrupted extraction, or a damaged hit: start from an empty folder.
  fs::remove_all(dir, ec);
  if (ec) return internal_error("Cannot clear damaged extraction '" + dir + "': " + ec.message());
  fs::create_directories(dir, ec);
  if (ec) return internal_error("Cannot create extraction folder '" + dir + "': " + ec.message());
  for (const auto& f : files) {
    // Entry names were validated by ArchiveReader::open, and read() accepts only real entries,
    // so `dir / f.path` stays inside `dir`.
    AITUNE_RETURN_IF_ERROR(reader.extract(f.path, f, dir + "/" + f.path));
  }
  AITUNE_RETURN_IF_ERROR(write_marker(dir + "/" + kExtractionMarker, marker_text(digest, files.size())));
  sync_dir(dir);
  return dir;
}

}  // namespace aitune
