// A leaf's semantic path as users see it (docs/reference/recording.md#binding-flattening-and-names):
// "x" for a string step, "('options', 'mask')" (Python's tuple repr) for a {"tuple": [...]} path.
// Shared by the manifest reader and the runtime's sample reader, which pairs skeleton paths with
// the spec's leaves by this form.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace aitune {

std::string semantic_display(const nlohmann::json& path);

}  // namespace aitune
