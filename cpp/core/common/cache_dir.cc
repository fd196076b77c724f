#include "common/cache_dir.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

namespace aitune {
namespace {

const char* non_empty(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// $HOME, else the password database's entry for this user (as Python's Path.home() does), else /tmp.
std::string home_dir(const EnvLookup& env) {
  if (const char* home = non_empty(env, "HOME")) return home;
  if (const passwd* entry = getpwuid(getuid()); entry != nullptr && entry->pw_dir != nullptr)
    return entry->pw_dir;
  return "/tmp";
}

// "~" and "~/x" name the home folder (Python's expanduser); "~user" is kept as written.
std::string expand_home(const std::string& path, const EnvLookup& env) {
  if (path == "~" || path.rfind("~/", 0) == 0) return home_dir(env) + path.substr(1);
  return path;
}

}  // namespace

std::string cache_dir_from(const EnvLookup& env) {
  if (const char* explicit_dir = non_empty(env, "AITUNE_CACHE_DIR")) return expand_home(explicit_dir, env);
  if (const char* xdg = non_empty(env, "XDG_CACHE_HOME")) return expand_home(xdg, env) + "/aitune";
  return home_dir(env) + "/.cache/aitune";
}

std::string default_cache_dir() {
  return cache_dir_from([](const char* name) { return std::getenv(name); });
}

}  // namespace aitune
