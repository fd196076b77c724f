#include "checkpoint/extraction_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/test_files.h"

namespace aitune {
namespace {

namespace fs = std::filesystem;

using test_files::read_all;
using test_files::write_all;

class TempDir : public test_files::TempDir {
 public:
  TempDir() : test_files::TempDir("aitune-cache") {}
};

class ExtractionCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto writer = ArchiveWriter::create(dir_ / "model.ait");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->add_bytes("modules/0/graphs/0/backend/model.pt2", std::string(5000, 'p')).ok());
    ASSERT_TRUE(writer->add_bytes("modules/0/graphs/0/backend/model_raw.onnx", "onnx-graph").ok());
    ASSERT_TRUE(writer->add_bytes("weights/root.safetensors", "weights").ok());
    files_ = writer->files();
    ASSERT_TRUE(writer->finish(R"({"format_version": 1})").ok());
    auto reader = ArchiveReader::open(dir_ / "model.ait");
    ASSERT_TRUE(reader.ok()) << reader.status().to_string();
    reader_.emplace(std::move(reader).value());
    root_ = dir_ / "cache/checkpoints";
    // Only what needs a path is extracted; the safetensors stays in the mapped archive.
    wanted_ = {files_[0], files_[1]};
  }

  std::string extract(bool verify_full) {
    auto out = extract_all(*reader_, wanted_, root_, verify_full);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? *out : "";
  }

  TempDir dir_;
  std::vector<FileRecord> files_, wanted_;
  std::optional<ArchiveReader> reader_;
  std::string root_;
};

TEST_F(ExtractionCacheTest, MissExtractsEveryListedFileAndWritesMarker) {
  const std::string out = extract(false);
  EXPECT_EQ(out, root_ + "/" + reader_->digest());
  EXPECT_EQ(read_all(out + "/modules/0/graphs/0/backend/model.pt2"), std::string(5000, 'p'));
  EXPECT_EQ(read_all(out + "/modules/0/graphs/0/backend/model_raw.onnx"), "onnx-graph");
  EXPECT_FALSE(fs::exists(out + "/weights/root.safetensors"));
  EXPECT_TRUE(fs::exists(out + "/.complete"));
  EXPECT_EQ(read_all(out + "/.complete"), reader_->digest() + "\n");
  EXPECT_TRUE(fs::exists(root_ + "/" + reader_->digest() + ".lock"));
  // No temp files left behind.
  for (const auto& e : fs::recursive_directory_iterator(out)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST_F(ExtractionCacheTest, HitReusesTheFolder) {
  const std::string out = extract(false);
  write_all(out + "/sentinel", "kept on a hit");  // a re-extraction would clear it
  EXPECT_EQ(extract(false), out);
  EXPECT_TRUE(fs::exists(out + "/sentinel"));
  EXPECT_EQ(extract(true), out);
  EXPECT_TRUE(fs::exists(out + "/sentinel"));
}

TEST_F(ExtractionCacheTest, DamagedFileIsExtractedAgainAlone) {
  const std::string out = extract(false);
  const std::string onnx = out + "/modules/0/graphs/0/backend/model_raw.onnx";
  write_all(out + "/sentinel", "x");  // survives: only damaged files are replaced

  // Wrong size: the fast check notices.
  write_all(onnx, "short");
  EXPECT_EQ(extract(false), out);
  EXPECT_EQ(read_all(onnx), "onnx-graph");

  // Same size, different bytes: the write changed the file's stamp (ctime), so even the fast
  // check hashes it again and extracts it anew (a flipped byte of a cached .so used to be mapped).
  write_all(onnx, "ONNX-GRAPH");
  EXPECT_EQ(extract(false), out);
  EXPECT_EQ(read_all(onnx), "onnx-graph");
  write_all(onnx, "ONNX-GRAPH");
  EXPECT_EQ(extract(true), out);
  EXPECT_EQ(read_all(onnx), "onnx-graph");

  // Missing file.
  fs::remove(onnx);
  EXPECT_EQ(extract(false), out);
  EXPECT_EQ(read_all(onnx), "onnx-graph");
  EXPECT_TRUE(fs::exists(out + "/sentinel"));
}

TEST_F(ExtractionCacheTest, StampsRecordEveryVerifiedFile) {
  const std::string out = extract(false);
  const std::string stamps = read_all(out + "/.stamps");
  EXPECT_NE(stamps.find("\tmodules/0/graphs/0/backend/model.pt2\n"), std::string::npos) << stamps;
  EXPECT_NE(stamps.find("\tmodules/0/graphs/0/backend/model_raw.onnx\n"), std::string::npos) << stamps;
  // A cache from before stamps (no .stamps): files are hashed once and stamped, not re-extracted.
  write_all(out + "/sentinel", "x");
  fs::remove(out + "/.stamps");
  EXPECT_EQ(extract(false), out);
  EXPECT_EQ(read_all(out + "/.stamps"), stamps);
  EXPECT_TRUE(fs::exists(out + "/sentinel"));
}

// chattr +i makes a folder unwritable even for root (tests may run as root, for whom permission
// bits do not apply). Returns false when the file system or the user cannot do it.
bool set_immutable(const std::string& path, bool on) {
  const std::string cmd = std::string("chattr ") + (on ? "+i " : "-i ") + "'" + path + "' 2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

TEST_F(ExtractionCacheTest, ReadOnlyCacheServesACompleteExtraction) {
  const std::string out = extract(false);
  fs::remove(root_ + "/" + reader_->digest() + ".lock");  // a cache copied without its lock files
  if (!set_immutable(root_, true))
    GTEST_SKIP() << "chattr +i is not available here (needs ext2/3/4 and root)";
  set_immutable(out, true);
  auto served = extract_all(*reader_, wanted_, root_, false);
  auto full = extract_all(*reader_, wanted_, root_, true);
  // A damaged file cannot be replaced in a read-only cache: the error says what to do.
  set_immutable(out, false);
  write_all(out + "/modules/0/graphs/0/backend/model_raw.onnx", "ONNX-GRAPH");
  set_immutable(out, true);
  auto damaged = extract_all(*reader_, wanted_, root_, false);
  set_immutable(out, false);
  set_immutable(root_, false);
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  EXPECT_EQ(*served, out);
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().message().find("set AITUNE_CACHE_DIR"), std::string::npos)
      << damaged.status().to_string();
}

TEST_F(ExtractionCacheTest, FolderWithoutItsMarkerIsClearedAndExtractedAnew) {
  const std::string out = extract(false);
  // Missing marker (an interrupted first extraction), then a marker of another archive: the
  // nested folders are cleared too.
  write_all(out + "/sentinel", "x");
  fs::create_directories(out + "/deep/er/still");
  write_all(out + "/deep/er/still/file", "x");
  fs::remove(out + "/.complete");
  EXPECT_EQ(extract(false), out);
  EXPECT_TRUE(fs::exists(out + "/.complete"));
  EXPECT_FALSE(fs::exists(out + "/sentinel"));
  EXPECT_FALSE(fs::exists(out + "/deep"));
  EXPECT_EQ(read_all(out + "/modules/0/graphs/0/backend/model.pt2"), std::string(5000, 'p'));
  write_all(out + "/sentinel", "x");
  write_all(out + "/.complete", "something else\n");
  EXPECT_EQ(extract(false), out);
  EXPECT_FALSE(fs::exists(out + "/sentinel"));
  EXPECT_EQ(read_all(out + "/.complete"), reader_->digest() + "\n");
}

TEST_F(ExtractionCacheTest, LoadsNeedingDifferentFilesShareTheFolder) {
  // The C++ runtime extracts the AOT artifact only; Python every path artifact. Either order
  // keeps the folder and adds what is missing (it used to clear the other's extraction).
  const std::vector<FileRecord> runtime = {files_[0]};
  auto first = extract_all(*reader_, runtime, root_, false);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  write_all(*first + "/sentinel", "x");
  EXPECT_EQ(extract(false), *first);
  EXPECT_EQ(read_all(*first + "/modules/0/graphs/0/backend/model_raw.onnx"), "onnx-graph");
  EXPECT_TRUE(fs::exists(*first + "/sentinel"));
  auto again = extract_all(*reader_, runtime, root_, true);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(*again, *first);
  EXPECT_TRUE(fs::exists(*first + "/sentinel"));
  // An older marker (digest and file count) still names the archive.
  write_all(*first + "/.complete", reader_->digest() + "\n1\n");
  EXPECT_EQ(extract(false), *first);
  EXPECT_TRUE(fs::exists(*first + "/sentinel"));
}

TEST_F(ExtractionCacheTest, ConcurrentExtractorsAgree) {
  std::vector<std::string> outs(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < outs.size(); ++i) {
    threads.emplace_back([&, i] {
      auto out = extract_all(*reader_, wanted_, root_, i % 2 == 0);
      outs[i] = out.ok() ? *out : out.status().to_string();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& o : outs) EXPECT_EQ(o, root_ + "/" + reader_->digest());
  EXPECT_EQ(read_all(outs[0] + "/modules/0/graphs/0/backend/model.pt2"), std::string(5000, 'p'));
}

TEST_F(ExtractionCacheTest, BadRecordsFailWithoutMarker) {
  auto bad = wanted_;
  bad[1].sha256 = std::string(64, '0');
  auto out = extract_all(*reader_, bad, root_, false);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(out.status().message(),
            "Failed to verify SHA hashes for files: ['modules/0/graphs/0/backend/model_raw.onnx']");
  EXPECT_FALSE(fs::exists(root_ + "/" + reader_->digest() + "/.complete"));

  auto ghost = wanted_;
  ghost.push_back({"../../outside", 1, std::string(64, '0')});
  out = extract_all(*reader_, ghost, root_, false);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCorrupt);
  EXPECT_FALSE(fs::exists(dir_ / "outside"));

  auto marker = wanted_;
  marker.push_back({".complete", 1, std::string(64, '0')});
  EXPECT_EQ(extract_all(*reader_, marker, root_, false).status().code(), StatusCode::kCorrupt);
  auto probed = wanted_;
  probed.push_back({"model.pt2.probed-0", 1, std::string(64, '0')});
  EXPECT_EQ(extract_all(*reader_, probed, root_, false).status().code(), StatusCode::kCorrupt);

  // A good call afterwards still works.
  EXPECT_EQ(extract(false), root_ + "/" + reader_->digest());
}

}  // namespace
}  // namespace aitune
