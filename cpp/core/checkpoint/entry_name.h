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

// A name that aitune's own files take in an extraction folder
// (docs/reference/checkpoint.md#extraction-cache): the top-level `.complete` marker and `.stamps` list and
// their temporary files (`.complete.tmp-…`), and the AOTInductor load-check record beside a package
// (`<file>.probed-<device>`). An archive entry of such a name would be extracted over them, so every reader
// refuses it as a corrupt checkpoint.
bool is_reserved_entry_name(std::string_view name);

// kCorrupt "Entry '<name>' resolves outside checkpoint" (for the reader).
Status escapes(std::string_view name);

}  // namespace aitune::zip
