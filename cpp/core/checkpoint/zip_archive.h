// The checkpoint container (docs/reference/checkpoint.md): one ZIP archive whose entries are STORED and whose
// entry data starts on a 64-byte boundary, so safetensors and TensorRT plans are used in place from
// a read-only memory mapping of the file.
//
// Why a hand-written ZIP: torch ships no public ZIP API (its PyTorchStreamReader insists on torch's
// own archive layout: one top folder, its own record names and alignment), and libzip is not
// installed on the GPU machines. STORED entries keep the format small: local file header + data,
// central directory, end-of-central-directory record. ZIP64 (zip64.h) is written only where a
// value does not fit: an entry of 4 GiB or more, one starting beyond 4 GiB, a central directory
// beyond 4 GiB, more than 65534 entries; smaller archives are plain ZIP. The reader accepts ZIP64;
// compressed, encrypted, data-descriptor and multi-disk archives are refused as kUnsupported.
//
// Implemented along its seams: zip_writer.cc, zip_reader.cc, entry_name.{h,cc} (name rules),
// crc32.{h,cc} and sha256.{h,cc} (checksums), zip_format.h (record layout), posix_file.{h,cc}.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "checkpoint/sha256.h"  // sha256_hex, sha256_file: part of this API
#include "common/status.h"

namespace aitune {

// One row of the manifest's "files" list.
struct FileRecord {
  std::string path;    // entry name inside the archive, '/'-separated and relative
  uint64_t size = 0;   // bytes
  std::string sha256;  // lowercase hex
};

inline constexpr std::string_view kManifestEntryName = "manifest.json";
inline constexpr uint64_t kEntryAlignment = 64;  // bytes; data of every entry starts on this boundary

struct ZipWriteOptions {
  // Test only: ZIP64 records for every entry and the end record even when all values fit in 32
  // bits, so small archives exercise the ZIP64 format. Real checkpoints leave it off.
  bool force_zip64 = false;
};

// Writes an archive. Nothing appears at `final_path` until finish() succeeds: the bytes go to
// `<final_path>.tmp-<pid>-<n>` (unique per writer), which is renamed over `final_path` at the end and removed
// when the writer is destroyed unfinished. Move-only; not thread-safe (one writer per thread).
class ArchiveWriter {
 public:
  // Opens the temporary file next to `final_path` (so the final rename stays on one filesystem).
  static StatusOr<ArchiveWriter> create(std::string final_path, ZipWriteOptions options = {});

  ArchiveWriter(ArchiveWriter&& other) noexcept;
  ArchiveWriter& operator=(ArchiveWriter&& other) noexcept;
  ArchiveWriter(const ArchiveWriter&) = delete;
  ArchiveWriter& operator=(const ArchiveWriter&) = delete;
  ~ArchiveWriter();

  // Both validate `entry_name` (relative, '/'-separated, no '..', '.', empty component or
  // backslash, not "manifest.json", not added before) and hash the content now, so files() can be
  // written into the manifest before finish(). add_file keeps only the path: the file is streamed
  // again by finish(), which fails if it changed in between. add_bytes copies `data`.
  Status add_file(std::string entry_name, std::string source_path);
  Status add_bytes(std::string entry_name, std::string_view data);

  // The manifest's "files" rows, in add order.
  std::vector<FileRecord> files() const;

  // Writes manifest.json first, then every entry in add order, the central directory and the
  // end record; fsyncs and renames onto the final path. The writer is spent afterwards.
  Status finish(std::string_view manifest_json);

  // Closes and removes the temporary file of an unfinished writer now (after finish(), nothing);
  // the writer is spent. For a caller that stops half-way and cannot wait for the destructor
  // (Python's writer lives as long as the traceback of the error that stopped it).
  void abandon();

  const std::string& final_path() const { return final_path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  struct Pending {
    FileRecord record;
    uint32_t crc32 = 0;
    std::string source_path;  // add_file: streamed by finish()
    std::string bytes;        // add_bytes: owned copy
    bool from_file = false;
  };

  ArchiveWriter(std::string final_path, std::string temp_path, int fd, ZipWriteOptions options);
  Status check_new_name(const std::string& entry_name) const;

  std::string final_path_;
  std::string temp_path_;
  int fd_ = -1;  // the temp file; -1 once closed or moved from
  ZipWriteOptions options_;
  bool finished_ = false;
  std::vector<Pending> pending_;           // add order
  std::unordered_set<std::string> names_;  // entry names in pending_, for the duplicate check
};

// Reads an archive through a read-only memory mapping. open() validates the whole structure (no
// entry data is read); read() and extract() verify an entry's SHA-256 against the manifest record
// the first time and remember the computed hash. Move-only; read(), extract() and the accessors
// may be called from several threads at once. Views returned by read() and manifest_bytes() stay
// valid while the reader lives (moving it keeps them valid). The file must not be truncated while
// mapped (SIGBUS); checkpoints are written under a temporary name and renamed, never rewritten.
class ArchiveReader {
 public:
  static StatusOr<ArchiveReader> open(std::string path);

  ArchiveReader(ArchiveReader&& other) noexcept;
  ArchiveReader& operator=(ArchiveReader&& other) noexcept;
  ArchiveReader(const ArchiveReader&) = delete;
  ArchiveReader& operator=(const ArchiveReader&) = delete;
  ~ArchiveReader();

  const std::string& path() const;
  // manifest.json's bytes; open() guarantees it is the first entry.
  std::string_view manifest_bytes() const;
  // Archive digest (docs/reference/checkpoint.md#integrity-and-compatibility): lowercase hex SHA-256 of
  // manifest_bytes().
  std::string digest() const;
  // Every entry, manifest.json included, in central-directory order.
  std::vector<std::string> entry_names() const;
  // Stored size of an entry; nullopt when there is no such entry.
  std::optional<uint64_t> entry_size(const std::string& name) const;

  // kCorrupt unless the archive holds exactly the listed entries (plus manifest.json) with the
  // listed sizes. Hashes are checked lazily by read()/extract().
  Status check_listed(const std::vector<FileRecord>& listed) const;

  // Zero-copy view of an entry's data after checking its size and SHA-256 against `expected`.
  StatusOr<std::string_view> read(const std::string& name, const FileRecord& expected) const;

  // Verifies the entry, then writes it to `dest_path` (temp file + fsync + rename), creating
  // parent directories.
  Status extract(const std::string& name, const FileRecord& expected, const std::string& dest_path) const;

 private:
  struct State;
  explicit ArchiveReader(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;  // heap-allocated so views and the mutex survive moves
};

}  // namespace aitune
