// The aitune cache folder, by the same rule as Python's `config.cache_dir`
// (docs/reference/configuration.md#environment-variables): $AITUNE_CACHE_DIR, else $XDG_CACHE_HOME/aitune,
// else ~/.cache/aitune. An empty variable counts as unset (as XDG says for XDG_CACHE_HOME), and a
// leading "~" is the home folder, so the C++ runtime and `aitune run` extract to the folder a Python
// process on the same machine uses.
#pragma once

#include <functional>
#include <string>

namespace aitune {

// Looks up an environment variable; nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// The rule, on any environment (unit tests pass their own lookup).
std::string cache_dir_from(const EnvLookup& env);

// The rule on this process's environment.
std::string default_cache_dir();

}  // namespace aitune
