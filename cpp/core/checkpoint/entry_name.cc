#include "checkpoint/entry_name.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace aitune::zip {

NameIssue classify_entry_name(std::string_view name) {
  if (name.empty() || name.size() > 0xFFFF || name.find('\0') != std::string_view::npos)
    return NameIssue::kMalformed;
  if (name.front() == '/' || name.find('\\') != std::string_view::npos) return NameIssue::kEscapes;
  if (name.size() >= 2 && name[1] == ':' && std::isalpha(static_cast<unsigned char>(name[0]))) {
    return NameIssue::kEscapes;  // "C:..." is absolute for Windows extractors
  }
  NameIssue issue = NameIssue::kNone;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(name.find('/', start), name.size());
    const std::string_view part = name.substr(start, end - start);
    if (part == "..") return NameIssue::kEscapes;
    if (part.empty() || part == ".") issue = NameIssue::kMalformed;
    if (end == name.size()) break;
    start = end + 1;
  }
  return issue;
}

bool is_reserved_entry_name(std::string_view name) {
  for (const std::string_view own : {".complete", ".stamps"}) {
    if (name == own ||
        (name.size() > own.size() && name.substr(0, own.size()) == own && name[own.size()] == '.'))
      return true;
  }
  const size_t slash = name.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? name : name.substr(slash + 1);
  return last.find(".probed-") != std::string_view::npos;
}

Status escapes(std::string_view name) {
  return {StatusCode::kCorrupt, "Entry '" + std::string(name) + "' resolves outside checkpoint"};
}

}  // namespace aitune::zip
