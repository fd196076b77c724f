// Bindings of the checkpoint container (cpp/core/checkpoint): ArchiveWriter, ArchiveReader and the
// extraction cache, so Python save/load and the C++ runtime read and write one format with one
// implementation. Torch-free: only pybind11 and aitune_core.
#pragma once

#include <pybind11/pybind11.h>

namespace aitune::python {

// Adds ArchiveWriter and ArchiveReader (and the typed manifest, manifest_bindings.h) to `m`. File records
// cross as dicts
// {"path": str, "size": int, "sha256": str}, the manifest's "files" rows.
void register_checkpoint_bindings(pybind11::module_& m);

}  // namespace aitune::python
