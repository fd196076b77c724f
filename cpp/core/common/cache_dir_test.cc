#include "common/cache_dir.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace aitune {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(CacheDir, ExplicitVariableWins) {
  EXPECT_EQ(
      cache_dir_from(env_of({{"AITUNE_CACHE_DIR", "/data/ait"}, {"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}})),
      "/data/ait");
}

TEST(CacheDir, XdgCacheHomeIsNext) {
  EXPECT_EQ(cache_dir_from(env_of({{"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/h"}})), "/xdg/aitune");
}

TEST(CacheDir, HomeCacheLast) { EXPECT_EQ(cache_dir_from(env_of({{"HOME", "/h"}})), "/h/.cache/aitune"); }

TEST(CacheDir, EmptyVariablesCountAsUnset) {
  EXPECT_EQ(cache_dir_from(env_of({{"AITUNE_CACHE_DIR", ""}, {"XDG_CACHE_HOME", ""}, {"HOME", "/h"}})),
            "/h/.cache/aitune");
}

TEST(CacheDir, LeadingTildeIsTheHomeFolder) {
  EXPECT_EQ(cache_dir_from(env_of({{"AITUNE_CACHE_DIR", "~/ait"}, {"HOME", "/h"}})), "/h/ait");
  EXPECT_EQ(cache_dir_from(env_of({{"XDG_CACHE_HOME", "~"}, {"HOME", "/h"}})), "/h/aitune");
  EXPECT_EQ(cache_dir_from(env_of({{"AITUNE_CACHE_DIR", "~other/ait"}, {"HOME", "/h"}})), "~other/ait");
}

TEST(CacheDir, WithoutHomeUsesThePasswordDatabase) {
  const std::string dir = cache_dir_from(env_of({}));
  EXPECT_FALSE(dir.empty());
  EXPECT_EQ(dir.substr(dir.size() - std::string("/.cache/aitune").size()), "/.cache/aitune");
}

}  // namespace
}  // namespace aitune
