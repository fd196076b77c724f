// The extraction cache (SPEC §10.4): artifacts that need a file path (.pt2, Torch-TRT programs,
// ONNX with external data) are extracted once per archive digest and reused by later loads.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/zip_archive.h"
#include "common/status.h"

namespace aitune {

inline constexpr const char* kExtractionMarker = ".complete";

// Returns `<cache_root>/<reader.digest()>`, holding every file of `files` at its entry path.
// `cache_root` is `<cache_dir>/checkpoints` and is created when missing. A `.complete` marker is
// written last, after every file is fsynced; an exclusive flock on `<cache_root>/<digest>.lock`
// makes concurrent processes (and threads) extract once and wait for each other. On a hit,
// verify_full=false checks the marker and the file sizes, verify_full=true re-hashes every file;
// a hit that fails either check is deleted and extracted again from the (verified) archive.
StatusOr<std::string> extract_all(const ArchiveReader& reader, const std::vector<FileRecord>& files,
                                  const std::string& cache_root, bool verify_full);

}  // namespace aitune
