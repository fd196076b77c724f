// Internal to the checkpoint container: POSIX file helpers that retry on EINTR, shared by the
// writer, the reader and sha256_file. Not part of the public API.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace aitune::zip {

inline constexpr size_t kChunk = size_t{1} << 20;  // streaming buffer, bytes

class Fd {  // closes on scope exit
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }

 private:
  int fd_;
};

// False with errno set when a write fails (a zero-byte write is EIO).
bool write_all(int fd, const char* data, size_t n);
// ::read, retried on EINTR.
ssize_t read_some(int fd, char* buf, size_t n);
// fsync of the directory makes a rename inside it durable; best effort (not every filesystem can).
void sync_parent_dir(const std::string& path);

}  // namespace aitune::zip
