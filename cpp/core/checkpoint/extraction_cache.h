// The extraction cache (docs/reference/checkpoint.md#extraction-cache): artifacts that need a file path
// (.pt2, Torch-TRT programs, ONNX with external data) are extracted once per archive digest and reused by
// later loads.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/zip_archive.h"
#include "common/status.h"

namespace aitune {

inline constexpr const char* kExtractionMarker = ".complete";
inline constexpr const char* kExtractionStamps = ".stamps";

// Returns `<cache_root>/<reader.digest()>`, holding every file of `files` at its entry path.
// `cache_root` is `<cache_dir>/checkpoints` and is created when missing. The `.complete` marker,
// naming the archive, is written after the first extraction's files are fsynced; later loads that
// need other files of the same archive (the C++ runtime extracts fewer than Python) add them. An
// exclusive flock on `<cache_root>/<digest>.lock` makes concurrent processes (and threads) extract
// once and wait for each other. Every requested file is checked against the archive's SHA-256:
// when it is extracted, and on later loads through its stamp in `.stamps` (size, inode, mtime and
// ctime: any write to the file changes them), re-hashing when the stamp differs or with
// verify_full=true. A missing or damaged file is extracted again from the (verified) archive, and
// a folder without the marker (interrupted, foreign) is cleared and extracted anew. A read-only
// cache serves a complete, undamaged extraction; otherwise the error names the fix.
StatusOr<std::string> extract_all(const ArchiveReader& reader, const std::vector<FileRecord>& files,
                                  const std::string& cache_root, bool verify_full);

}  // namespace aitune
