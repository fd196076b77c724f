// The rules for entry names inside a checkpoint: what the writer refuses to add and what the
// reader refuses to open (docs/reference/checkpoint.md). An extractor must never be led outside its folder.
#pragma once

#include <string_view>

#include "common/status.h"

namespace aitune::zip {

enum class NameIssue {
  kNone,
  kEscapes,    // absolute ('/x', 'C:x'), a backslash or a '..' part: would resolve outside the folder
  kMalformed,  // empty, over 65535 bytes, a NUL, or an empty or '.' part
};

NameIssue classify_entry_name(std::string_view name);

// kCorrupt "Entry '<name>' resolves outside checkpoint" (for the reader).
Status escapes(std::string_view name);

}  // namespace aitune::zip
