// libFuzzer target: ArchiveReader must reject any byte string with a Status, never crash, hang or
// read outside the mapping. Build and run: docs/fuzzing.md.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/zip_archive.h"

namespace {

// One scratch file per fuzzing process (the reader needs a real file to memory-map), removed at exit.
struct ScratchFile {
  std::string path = "/tmp/aitune-zip-fuzz-" + std::to_string(::getpid()) + ".ait";
  ~ScratchFile() { ::unlink(path.c_str()); }
};

const std::string& scratch_path() {
  static const ScratchFile file;
  return file.path;
}

bool write_scratch(const uint8_t* data, size_t size) {
  const int fd = ::open(scratch_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd, data + done, size - done);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  ::close(fd);
  return done == size;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!write_scratch(data, size)) return 0;
  auto reader = aitune::ArchiveReader::open(scratch_path());
  if (!reader.ok()) return 0;
  volatile size_t sink = reader->manifest_bytes().size() + reader->digest().size();
  std::vector<aitune::FileRecord> listed;
  for (const auto& name : reader->entry_names()) {
    // The real size, so read() goes on to hash the data; a dummy hash, so verification fails.
    aitune::FileRecord record{name, reader->entry_size(name).value_or(0), std::string(64, '0')};
    auto view = reader->read(name, record);
    if (view.ok()) sink = sink + view->size();
    listed.push_back(std::move(record));
  }
  (void)reader->check_listed(listed);
  if (!listed.empty()) listed.pop_back();
  (void)reader->check_listed(listed);
  (void)sink;
  return 0;
}
