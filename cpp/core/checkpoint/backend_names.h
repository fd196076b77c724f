// Stable backend names in checkpoint manifests (docs/reference/checkpoint.md#layout-and-manifest). Format 2
// stores a backend entry's stable `name`; format 1 stored its Python class path, which this table
// maps to the same names so that files written by earlier releases keep loading. The one copy of
// the table: Python reads it as `_C.LEGACY_BACKEND_NAMES`.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace aitune {

// Manifest format versions this build reads: 1 (backend "class") and 2 (backend "name").
inline constexpr int kManifestFormatMin = 1;
inline constexpr int kManifestFormatMax = 2;

// Every backend class path a format-1 checkpoint holds for a built-in backend -> its stable name.
const std::map<std::string, std::string, std::less<>>& legacy_backend_names();

// The stable name of a format-1 class path: the table's entry, else "custom:<class path>" (the
// name a user-written backend class is registered under).
std::string backend_name_for_class_path(std::string_view class_path);

}  // namespace aitune
