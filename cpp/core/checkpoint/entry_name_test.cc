#include "checkpoint/entry_name.h"

#include <gtest/gtest.h>

#include <string>

namespace aitune::zip {
namespace {

TEST(EntryNameTest, RelativeSlashSeparatedNamesAreFine) {
  EXPECT_EQ(classify_entry_name("weights.safetensors"), NameIssue::kNone);
  EXPECT_EQ(classify_entry_name("mod/graph_0/plan.bin"), NameIssue::kNone);
  EXPECT_EQ(classify_entry_name("a..b/c"), NameIssue::kNone);  // '..' only as a whole part
}

TEST(EntryNameTest, NamesThatLeadOutsideTheFolderEscape) {
  for (const char* name : {"/etc/passwd", "../x", "a/../../x", "a\\b", "C:x", "c:/x"}) {
    EXPECT_EQ(classify_entry_name(name), NameIssue::kEscapes) << name;
  }
  EXPECT_EQ(escapes("../x").code(), StatusCode::kCorrupt);
  EXPECT_EQ(escapes("../x").message(), "Entry '../x' resolves outside checkpoint");
}

TEST(EntryNameTest, EmptyOrDotPartsAndOversizedNamesAreMalformed) {
  for (const std::string name : {std::string(), std::string("a//b"), std::string("a/./b"), std::string("a/"),
                                 std::string("a\0b", 3), std::string(0x10000, 'a')}) {
    EXPECT_EQ(classify_entry_name(name), NameIssue::kMalformed) << name.size();
  }
  EXPECT_EQ(classify_entry_name(std::string(0xFFFF, 'a')), NameIssue::kNone);
}

TEST(EntryNameTest, NamesOfTheExtractionCachesOwnFilesAreReserved) {
  for (const char* name : {".complete", ".stamps", ".complete.tmp-12-0", ".stamps.tmp-1-2",
                           "modules/0/graphs/0/backend/model.pt2.probed--1", "model.pt2.probed-0"}) {
    EXPECT_TRUE(is_reserved_entry_name(name)) << name;
  }
  for (const char* name :
       {"modules/0/.complete", "a/.stamps", ".completed", ".complete_x", "probed-0", "x.probe"}) {
    EXPECT_FALSE(is_reserved_entry_name(name)) << name;
  }
}

}  // namespace
}  // namespace aitune::zip
