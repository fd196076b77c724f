// Bindings of the typed checkpoint manifest (cpp/core/checkpoint/manifest.h): the one reader of
// manifest.json, handed to Python as read-only objects (docs/design.md#the-checkpoint), which
// ait.load and the results store use as they are: Python never parses the manifest or mirrors its
// fields. Also the format's constants and the one fingerprint builder.
#pragma once

#include <pybind11/pybind11.h>

#include "checkpoint/manifest.h"

namespace aitune {
class ArchiveReader;
}

namespace aitune::python {

// Adds Manifest, ManifestModule, ManifestGraph, ManifestBackend (its properties from
// backend_fields(), listed in MANIFEST_BACKEND_FIELDS), ManifestLeaf, ManifestParam, ManifestRoot
// and FileRecord (read-only), read_manifest(text) / read_graph_spec(text) / read_state_manifest(text),
// MANIFEST_FORMAT, MANIFEST_RESULTS_KIND and current_fingerprint(...) to `m`. Free-form parts the
// structs keep as JSON text (a config, a constant's node, a weights index, ...) come out decoded
// (json.loads of that part).
void register_manifest_bindings(pybind11::module_& m);

// The archive's manifest, schema-checked and typed; CorruptCheckpointError or
// UnsupportedCheckpointError naming the checkpoint otherwise. Releases the GIL while it parses.
Manifest read_archive_manifest(const ArchiveReader& reader);

}  // namespace aitune::python
