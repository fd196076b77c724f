#include "checkpoint/zip_archive.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
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
  TempDir() : test_files::TempDir("aitune-zip") {}
};

uint16_t le16(const std::string& b, size_t at) {
  return static_cast<uint16_t>(static_cast<unsigned char>(b[at]) |
                               (static_cast<unsigned char>(b[at + 1]) << 8));
}
uint32_t le32(const std::string& b, size_t at) {
  return le16(b, at) | (static_cast<uint32_t>(le16(b, at + 2)) << 16);
}
void set16(std::string& b, size_t at, uint16_t v) {
  b[at] = static_cast<char>(v & 0xFF);
  b[at + 1] = static_cast<char>(v >> 8);
}
void set32(std::string& b, size_t at, uint32_t v) {
  set16(b, at, static_cast<uint16_t>(v & 0xFFFF));
  set16(b, at + 2, static_cast<uint16_t>(v >> 16));
}
uint64_t le64(const std::string& b, size_t at) {
  return le32(b, at) | (static_cast<uint64_t>(le32(b, at + 4)) << 32);
}
void set64(std::string& b, size_t at, uint64_t v) {
  set32(b, at, static_cast<uint32_t>(v & 0xFFFFFFFFu));
  set32(b, at + 4, static_cast<uint32_t>(v >> 32));
}

// Bitwise CRC-32, independent of the slice-by-8 code under test.
uint32_t reference_crc32(std::string_view data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// One entry as found by walking the raw bytes (local header + central directory record).
struct RawEntry {
  std::string name;
  size_t local_offset, data_offset, central_offset;
  uint32_t size, crc;
};

std::vector<RawEntry> walk(const std::string& b) {
  const size_t end = b.size() - 22;
  EXPECT_EQ(le32(b, end), 0x06054b50u);
  const uint16_t count = le16(b, end + 10);
  size_t p = le32(b, end + 16);
  EXPECT_EQ(p + le32(b, end + 12), end);
  std::vector<RawEntry> out;
  for (uint16_t i = 0; i < count; ++i) {
    EXPECT_EQ(le32(b, p), 0x02014b50u);
    RawEntry e;
    e.name = b.substr(p + 46, le16(b, p + 28));
    e.central_offset = p;
    e.local_offset = le32(b, p + 42);
    e.size = le32(b, p + 24);
    e.crc = le32(b, p + 16);
    EXPECT_EQ(le32(b, e.local_offset), 0x04034b50u);
    e.data_offset = e.local_offset + 30 + le16(b, e.local_offset + 26) + le16(b, e.local_offset + 28);
    out.push_back(e);
    p += 46 + le16(b, p + 28) + le16(b, p + 30) + le16(b, p + 32);
  }
  return out;
}

void replace_all(std::string& b, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  int n = 0;
  for (size_t at = b.find(from); at != std::string::npos; at = b.find(from, at + 1), ++n)
    b.replace(at, to.size(), to);
  ASSERT_GT(n, 0) << from;
}

const std::string kManifest = R"({"format": "aitune.checkpoint", "format_version": 1})";

// Writes an archive with a bytes entry, a file entry and an empty entry (+ `extra` bytes entries).
std::vector<FileRecord> write_sample(const TempDir& dir, const std::string& path,
                                     const std::vector<std::string>& extra = {},
                                     ZipWriteOptions options = {}) {
  std::string big(100000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) % 251);
  write_all(dir / "plan.src", big);
  auto writer = ArchiveWriter::create(path, options);
  EXPECT_TRUE(writer.ok()) << writer.status().to_string();
  EXPECT_TRUE(writer->add_bytes("weights/root.safetensors", "hello weights").ok());
  EXPECT_TRUE(writer->add_file("modules/0/graphs/0/backend/tensorrt/model.plan", dir / "plan.src").ok());
  EXPECT_TRUE(writer->add_bytes("empty.json", "").ok());
  for (const auto& name : extra) EXPECT_TRUE(writer->add_bytes(name, "extra:" + name).ok());
  auto files = writer->files();
  const Status s = writer->finish(kManifest);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(writer->files().size(), files.size());  // still available after finish
  return files;
}

TEST(ZipArchiveTest, RoundTripBytesAndFiles) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  const auto files = write_sample(dir, path);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].path, "weights/root.safetensors");
  EXPECT_EQ(files[0].size, 13u);
  EXPECT_EQ(files[0].sha256, sha256_hex("hello weights"));
  EXPECT_EQ(files[1].size, 100000u);
  EXPECT_EQ(files[1].sha256, sha256_hex(read_all(dir / "plan.src")));
  EXPECT_EQ(files[2].sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");  // sha256("")

  auto reader = ArchiveReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ(reader->manifest_bytes(), kManifest);
  EXPECT_EQ(reader->digest(), sha256_hex(kManifest));
  EXPECT_EQ(reader->entry_names(),
            (std::vector<std::string>{"manifest.json", "weights/root.safetensors",
                                      "modules/0/graphs/0/backend/tensorrt/model.plan", "empty.json"}));
  EXPECT_EQ(reader->entry_size("empty.json"), 0u);
  EXPECT_FALSE(reader->entry_size("nope").has_value());
  ASSERT_TRUE(reader->check_listed(files).ok());
  auto a = reader->read(files[0].path, files[0]);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(*a, "hello weights");
  auto b = reader->read(files[1].path, files[1]);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, read_all(dir / "plan.src"));
  EXPECT_TRUE(reader->read(files[2].path, files[2]).ok());

  // Views stay valid when the reader moves.
  ArchiveReader moved = std::move(reader).value();
  EXPECT_EQ(*a, "hello weights");
  EXPECT_EQ(moved.manifest_bytes(), kManifest);

  ASSERT_TRUE(moved.extract(files[1].path, files[1], dir / "out/deep/model.plan").ok());
  EXPECT_EQ(read_all(dir / "out/deep/model.plan"), read_all(dir / "plan.src"));
}

TEST(ZipArchiveTest, ManifestFirstDataAlignedAndValidZipStructure) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  write_sample(dir, path, {"a", "bb/ccc", "d/e/f/g.json"});
  const std::string b = read_all(path);
  const auto entries = walk(b);
  ASSERT_EQ(entries.size(), 7u);
  EXPECT_EQ(entries[0].name, "manifest.json");
  EXPECT_EQ(entries[0].local_offset, 0u);
  size_t expected_offset = 0;
  for (const auto& e : entries) {
    EXPECT_EQ(e.local_offset, expected_offset) << e.name;  // archive order = central order
    EXPECT_EQ(e.data_offset % 64, 0u) << e.name;
    EXPECT_EQ(le16(b, e.local_offset + 8), 0) << "stored";
    EXPECT_EQ(le16(b, e.local_offset + 6) & 0x9, 0) << "no encryption, no data descriptor";
    EXPECT_EQ(b.substr(e.local_offset + 30, e.name.size()), e.name);
    EXPECT_EQ(le32(b, e.local_offset + 14), e.crc);
    EXPECT_EQ(le32(b, e.local_offset + 18), e.size);
    EXPECT_EQ(le32(b, e.local_offset + 22), e.size);
    EXPECT_EQ(e.crc, reference_crc32(std::string_view(b).substr(e.data_offset, e.size))) << e.name;
    expected_offset = e.data_offset + e.size;
  }
  EXPECT_EQ(b.substr(entries[0].data_offset, entries[0].size), kManifest);
}

TEST(ZipArchiveTest, FlippedDataByteFailsHashOnlyForThatEntry) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  const auto files = write_sample(dir, path);
  std::string b = read_all(path);
  for (const auto& e : walk(b)) {
    if (e.name == files[1].path) b[e.data_offset + 500] ^= 0x01;
  }
  write_all(dir / "tampered.ait", b);
  auto reader = ArchiveReader::open(dir / "tampered.ait");
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_TRUE(reader->check_listed(files).ok());   // sizes still match; hashes are checked on read
  for (int attempt = 0; attempt < 2; ++attempt) {  // the remembered hash gives the same verdict
    auto r = reader->read(files[1].path, files[1]);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_EQ(r.status().message(),
              "Failed to verify SHA hashes for files: ['modules/0/graphs/0/backend/tensorrt/model.plan']");
  }
  EXPECT_FALSE(reader->extract(files[1].path, files[1], dir / "x.plan").ok());
  EXPECT_FALSE(fs::exists(dir / "x.plan"));
  EXPECT_TRUE(reader->read(files[0].path, files[0]).ok());
  FileRecord wrong = files[0];
  wrong.sha256[0] = wrong.sha256[0] == '0' ? '1' : '0';
  EXPECT_EQ(reader->read(files[0].path, wrong).status().code(), StatusCode::kCorrupt);
  FileRecord upper = files[0];
  for (auto& c : upper.sha256) c = static_cast<char>(std::toupper(c));
  EXPECT_TRUE(reader->read(files[0].path, upper).ok());
}

TEST(ZipArchiveTest, TruncatedFileIsCorrupt) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  write_sample(dir, path);
  const std::string b = read_all(path);
  for (size_t keep : {size_t{0}, size_t{10}, size_t{21}, b.size() / 2, b.size() - 1}) {
    write_all(dir / "cut.ait", b.substr(0, keep));
    auto reader = ArchiveReader::open(dir / "cut.ait");
    ASSERT_FALSE(reader.ok()) << keep;
    EXPECT_EQ(reader.status().code(), StatusCode::kCorrupt) << keep << ": " << reader.status().to_string();
  }
}

TEST(ZipArchiveTest, UnlistedEntryAndMissingListedEntry) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  const auto files = write_sample(dir, path, {"extra.bin"});
  auto reader = ArchiveReader::open(path);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(reader->check_listed(files).ok());
  auto shorter = files;
  shorter.pop_back();
  Status s = reader->check_listed(shorter);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "Entry 'extra.bin' is not listed in the manifest");

  auto longer = files;
  longer.push_back({"ghost.bin", 3, sha256_hex("abc")});
  longer.push_back({"other.bin", 3, sha256_hex("abc")});
  s = reader->check_listed(longer);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "Failed to verify SHA hashes for files: ['ghost.bin', 'other.bin']");
  auto missing = reader->read("ghost.bin", longer[files.size()]);
  EXPECT_EQ(missing.status().message(), "Failed to verify SHA hashes for files: ['ghost.bin']");

  auto resized = files;
  resized[0].size += 1;
  s = reader->check_listed(resized);
  EXPECT_EQ(s.message(), "Failed to verify SHA hashes for files: ['weights/root.safetensors']");
  EXPECT_EQ(reader->read(resized[0].path, resized[0]).status().code(), StatusCode::kCorrupt);
}

TEST(ZipArchiveTest, WriterRejectsBadNames) {
  TempDir dir;
  auto writer = ArchiveWriter::create(dir / "w.ait");
  ASSERT_TRUE(writer.ok());
  for (const char* name :
       {"../evil", "a/../../evil", "/abs", "a\\b", "a//b", "./a", "a/", "", "C:/x", "..", "manifest.json"}) {
    Status s = writer->add_bytes(name, "x");
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name;
  }
  EXPECT_EQ(writer->add_file("../evil", dir / "w.ait.tmp-" + std::to_string(::getpid())).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(writer->add_bytes("ok/..name", "x").ok());  // '..' only as a whole component
  EXPECT_EQ(writer->add_bytes("ok/..name", "y").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writer->add_file("f", dir / "does-not-exist").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writer->files().size(), 1u);
}

TEST(ZipArchiveTest, CraftedPathEscapesRejectedAtOpen) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  write_sample(dir, path, {"aa/evil", "xabs", "lnk"});
  const std::string original = read_all(path);
  struct Case {
    std::string from, to;
  };
  for (const Case& c : {Case{"aa/evil", "../evil"}, Case{"xabs", "/abs"}, Case{"aa/evil", "aa\\evil"}}) {
    std::string b = original;
    replace_all(b, c.from, c.to);
    write_all(dir / "evil.ait", b);
    auto reader = ArchiveReader::open(dir / "evil.ait");
    ASSERT_FALSE(reader.ok()) << c.to;
    EXPECT_EQ(reader.status().code(), StatusCode::kCorrupt);
    EXPECT_EQ(reader.status().message(), "Entry '" + c.to + "' resolves outside checkpoint");
  }
  // A symlink per the Unix mode in the external attributes.
  std::string b = original;
  for (const auto& e : walk(b)) {
    if (e.name == "lnk") set32(b, e.central_offset + 38, 0120777u << 16);
  }
  write_all(dir / "link.ait", b);
  auto reader = ArchiveReader::open(dir / "link.ait");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().message(), "Entry 'lnk' resolves outside checkpoint");
}

TEST(ZipArchiveTest, UnsupportedFeaturesAndStructuralDamage) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  write_sample(dir, path, {"last"});
  const std::string original = read_all(path);
  const auto entries = walk(original);
  const auto& plan = entries[2];

  auto open_patched = [&](const std::function<void(std::string&)>& patch) {
    std::string b = original;
    patch(b);
    write_all(dir / "patched.ait", b);
    return ArchiveReader::open(dir / "patched.ait").status();
  };
  Status s = open_patched([&](std::string& b) {
    set16(b, plan.central_offset + 10, 8);  // deflate
    set16(b, plan.local_offset + 8, 8);
  });
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("compressed"), std::string::npos) << s.message();

  s = open_patched([&](std::string& b) { set16(b, plan.central_offset + 8, 1); });  // encrypted
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  s = open_patched([&](std::string& b) { set16(b, plan.central_offset + 8, 1 << 3); });  // data descriptor
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  s = open_patched(
      [&](std::string& b) { set16(b, b.size() - 22 + 8, 0x7); });  // entries on this disk != count
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("multi-disk"), std::string::npos) << s.message();
  // ZIP64 sentinels without ZIP64 records: the count is taken literally, a size has no ZIP64 field.
  s = open_patched([&](std::string& b) {
    set16(b, b.size() - 22 + 8, 0xFFFF);
    set16(b, b.size() - 22 + 10, 0xFFFF);
  });
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("counts 65535 entries"), std::string::npos) << s.message();
  s = open_patched([&](std::string& b) { set32(b, plan.central_offset + 24, 0xFFFFFFFFu); });
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("entry '" + plan.name +
                             "' (central directory): no ZIP64 extra field, but the header "
                             "defers the original size to it"),
            std::string::npos)
      << s.message();

  // Entry data grown into the next entry's header.
  s = open_patched([&](std::string& b) {
    for (size_t at : {plan.central_offset + 20, plan.central_offset + 24, plan.local_offset + 18,
                      plan.local_offset + 22}) {
      set32(b, at, plan.size + 64);
    }
  });
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();

  // Last entry's data past the central directory.
  s = open_patched([&](std::string& b) {
    const auto& last = entries.back();
    for (size_t at : {last.central_offset + 20, last.central_offset + 24, last.local_offset + 18,
                      last.local_offset + 22}) {
      set32(b, at, last.size + 100000);
    }
  });
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);

  s = open_patched([&](std::string& b) { set32(b, plan.local_offset, 0x12345678); });
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  s = open_patched([&](std::string& b) { set32(b, plan.central_offset, 0x12345678); });
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  s = open_patched([&](std::string& b) { set32(b, b.size() - 22, 0); });  // no end record
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  s = open_patched([&](std::string& b) { b[plan.local_offset + 30] ^= 0x20; });  // local name differs
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  s = open_patched(
      [&](std::string& b) { replace_all(b, "weights/root", "modules/0/gr"); });  // a duplicate-free rename
  EXPECT_TRUE(s.ok()) << s.to_string();
  s = open_patched(
      [&](std::string& b) { replace_all(b, "empty.json", std::string("last\0\0\0\0\0\0", 10)); });
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);  // "last\0..." has a NUL: malformed name
}

TEST(ZipArchiveTest, ManifestMustBeFirstAndReferenceFormatIsRefused) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  write_sample(dir, path, {"manifest.jsox"});
  std::string b = read_all(path);
  replace_all(b, "manifest.json", "manifest.jsoy");
  replace_all(b, "manifest.jsox", "manifest.json");
  write_all(dir / "second.ait", b);
  auto reader = ArchiveReader::open(dir / "second.ait");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(reader.status().message().find("manifest.json is not the first entry"), std::string::npos);

  b = read_all(path);
  replace_all(b, "manifest.jsox", "manifest.jsoz");
  replace_all(b, "manifest.json", "state_dict.pt");  // same length
  write_all(dir / "reference.ait", b);
  reader = ArchiveReader::open(dir / "reference.ait");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(reader.status().message().find("reference"), std::string::npos);
}

TEST(ZipArchiveTest, MissingFileIsNotFound) {
  TempDir dir;
  auto reader = ArchiveReader::open(dir / "nope.ait");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reader.status().message(), "Checkpoint file not found: " + (dir / "nope.ait"));
  EXPECT_EQ(ArchiveReader::open(dir / "").status().code(), StatusCode::kInvalidArgument);  // a directory
}

TEST(ZipArchiveTest, AbandonedOrFailedWriterLeavesNothing) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  std::string temp;
  {
    auto writer = ArchiveWriter::create(path);
    ASSERT_TRUE(writer.ok());
    temp = writer->temp_path();
    EXPECT_EQ(temp.rfind(path + ".tmp-" + std::to_string(::getpid()) + "-", 0), 0u) << temp;
    auto second = ArchiveWriter::create(path);  // a second writer of the same path (another thread)
    ASSERT_TRUE(second.ok());
    EXPECT_NE(second->temp_path(), temp) << "two writers of one path must not share a temporary file";
    ASSERT_TRUE(writer->add_bytes("a", "x").ok());
    EXPECT_TRUE(fs::exists(temp));
  }
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(path));

  // The source file changes between add_file and finish.
  write_all(dir / "src", "original");
  {
    auto writer = ArchiveWriter::create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->add_file("a", dir / "src").ok());
    write_all(dir / "src", "changed!");
    Status s = writer->finish(kManifest);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("changed"), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(temp));
    EXPECT_FALSE(writer->add_bytes("b", "x").ok());
    EXPECT_FALSE(writer->finish(kManifest).ok());
  }
  // The source file disappears.
  {
    auto writer = ArchiveWriter::create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->add_file("a", dir / "src").ok());
    fs::remove(dir / "src");
    EXPECT_FALSE(writer->finish(kManifest).ok());
  }
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(path));

  EXPECT_EQ(ArchiveWriter::create(dir / "no/such/dir/x.ait").status().code(), StatusCode::kInvalidArgument);

  // A finished writer replaces an existing file and leaves no temp file.
  write_all(path, "old contents");
  {
    auto writer = ArchiveWriter::create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->finish("{}").ok());
    EXPECT_FALSE(writer->finish("{}").ok());
  }
  EXPECT_FALSE(fs::exists(temp));
  auto reader = ArchiveReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ(reader->manifest_bytes(), "{}");
  EXPECT_TRUE(reader->check_listed({}).ok());
}

TEST(ZipArchiveTest, ConcurrentReads) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  std::vector<std::string> names;
  for (int i = 0; i < 16; ++i)
    names.push_back(std::to_string(i) + ".bin");  // (GCC 12 -Wrestrict false positive on "e" + to_string)
  const auto files = write_sample(dir, path, names);
  auto reader = ArchiveReader::open(path);
  ASSERT_TRUE(reader.ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < files.size(); ++k) {
        const auto& f = files[(k + static_cast<size_t>(t)) % files.size()];
        if (!reader->read(f.path, f).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

// ---------------------------------------------------------------------------------------- ZIP64

// A force_zip64 archive decoded here, independently of zip64.cc, checking the layout on the way:
// every central header defers sizes and offset to a 24-byte ZIP64 field, every local header its
// sizes to a 16-byte one (followed by the alignment field); the end record's fields are sentinels.
struct Zip64Entry {
  std::string name;
  size_t central_offset, central_extra, local_offset, local_extra, data_offset;
  uint64_t size;
  uint32_t crc;
};
struct Zip64Layout {
  size_t end, locator, record;
  std::vector<Zip64Entry> entries;
};

Zip64Layout walk_forced_zip64(const std::string& b) {
  Zip64Layout t;
  t.end = b.size() - 22;
  t.locator = t.end - 20;
  t.record = t.locator - 56;
  EXPECT_EQ(le32(b, t.end), 0x06054b50u);
  for (size_t at : {t.end + 8, t.end + 10}) EXPECT_EQ(le16(b, at), 0xFFFF);
  for (size_t at : {t.end + 12, t.end + 16}) EXPECT_EQ(le32(b, at), 0xFFFFFFFFu);
  EXPECT_EQ(le32(b, t.locator), 0x07064b50u);
  EXPECT_EQ(le32(b, t.locator + 4), 0u);
  EXPECT_EQ(le64(b, t.locator + 8), t.record);
  EXPECT_EQ(le32(b, t.locator + 16), 1u);
  EXPECT_EQ(le32(b, t.record), 0x06064b50u);
  EXPECT_EQ(le64(b, t.record + 4), 44u);
  EXPECT_EQ(le16(b, t.record + 14), 45);  // version needed
  const uint64_t count = le64(b, t.record + 32);
  EXPECT_EQ(le64(b, t.record + 24), count);
  size_t p = le64(b, t.record + 48);
  EXPECT_EQ(p + le64(b, t.record + 40), t.record);
  for (uint64_t i = 0; i < count; ++i) {
    Zip64Entry e;
    EXPECT_EQ(le32(b, p), 0x02014b50u);
    EXPECT_EQ(le16(b, p + 6), 45);
    for (size_t at : {p + 20, p + 24, p + 42}) EXPECT_EQ(le32(b, at), 0xFFFFFFFFu);
    e.name = b.substr(p + 46, le16(b, p + 28));
    e.central_offset = p;
    e.central_extra = p + 46 + e.name.size();
    EXPECT_EQ(le16(b, p + 30), 28);
    EXPECT_EQ(le16(b, e.central_extra), 0x0001);
    EXPECT_EQ(le16(b, e.central_extra + 2), 24);
    e.size = le64(b, e.central_extra + 4);
    EXPECT_EQ(le64(b, e.central_extra + 12), e.size);
    e.local_offset = le64(b, e.central_extra + 20);
    e.crc = le32(b, p + 16);
    const size_t l = e.local_offset;
    EXPECT_EQ(le32(b, l), 0x04034b50u);
    EXPECT_EQ(le16(b, l + 4), 45);
    EXPECT_EQ(le32(b, l + 14), e.crc);
    for (size_t at : {l + 18, l + 22}) EXPECT_EQ(le32(b, at), 0xFFFFFFFFu);
    EXPECT_EQ(b.substr(l + 30, le16(b, l + 26)), e.name);
    e.local_extra = l + 30 + e.name.size();
    EXPECT_EQ(le16(b, e.local_extra), 0x0001);
    EXPECT_EQ(le16(b, e.local_extra + 2), 16);
    EXPECT_EQ(le64(b, e.local_extra + 4), e.size);
    EXPECT_EQ(le64(b, e.local_extra + 12), e.size);
    const uint16_t local_extra_size = le16(b, l + 28);
    if (local_extra_size > 20) {
      EXPECT_EQ(le16(b, e.local_extra + 20), 0xD935) << "alignment field after ZIP64";
    }
    e.data_offset = e.local_extra + local_extra_size;
    t.entries.push_back(e);
    p += 46 + le16(b, p + 28) + le16(b, p + 30) + le16(b, p + 32);
  }
  return t;
}

TEST(ZipArchiveTest, SmallArchivesAreByteIdenticalToPlainZip) {
  // Digests of archives written before ZIP64 support: without the option nothing changes.
  TempDir dir;
  write_sample(dir, dir / "a.ait", {"a", "bb/ccc", "d/e/f/g.json"});
  EXPECT_EQ(sha256_file(dir / "a.ait").value(),
            "b348e27c5bb8b065032a3b7082b5a718fe523f90080e9e72161eedf42172c1ab");
  auto writer = ArchiveWriter::create(dir / "empty.ait", ZipWriteOptions{.force_zip64 = false});
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->finish("{}").ok());
  EXPECT_EQ(sha256_file(dir / "empty.ait").value(),
            "bc6e2f5274e43a6576aba943856eb5b4ec98fb982bad4a0c566b2c39a0c0064c");
  const std::string b = read_all(dir / "a.ait");
  EXPECT_EQ(b.find(std::string("PK\x06\x07", 4)), std::string::npos) << "no ZIP64 locator";
  for (const auto& e : walk(b))
    EXPECT_EQ(le16(b, e.central_offset + 30), 0) << e.name << ": no central extra";
}

TEST(ZipArchiveTest, ForcedZip64RoundTripAlignedAndVerified) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  const auto files = write_sample(dir, path, {"a", "bb/ccc", "d/e/f/g.json"}, {.force_zip64 = true});
  const std::string b = read_all(path);
  const Zip64Layout layout = walk_forced_zip64(b);
  ASSERT_EQ(layout.entries.size(), 7u);
  size_t expected_offset = 0;
  for (const auto& e : layout.entries) {
    EXPECT_EQ(e.local_offset, expected_offset) << e.name;
    EXPECT_EQ(e.data_offset % 64, 0u) << e.name;
    EXPECT_EQ(e.crc, reference_crc32(std::string_view(b).substr(e.data_offset, e.size))) << e.name;
    expected_offset = e.data_offset + e.size;
  }
  EXPECT_EQ(layout.entries[2].size, 100000u);

  auto reader = ArchiveReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ(reader->manifest_bytes(), kManifest);
  EXPECT_EQ(reader->entry_names().size(), 7u);
  ASSERT_TRUE(reader->check_listed(files).ok());
  for (const auto& f : files) {
    auto data = reader->read(f.path, f);
    ASSERT_TRUE(data.ok()) << f.path << ": " << data.status().to_string();
    EXPECT_EQ(data->size(), f.size);
  }
  EXPECT_EQ(*reader->read(files[0].path, files[0]), "hello weights");
  ASSERT_TRUE(reader->extract(files[1].path, files[1], dir / "out/model.plan").ok());
  EXPECT_EQ(read_all(dir / "out/model.plan"), read_all(dir / "plan.src"));

  // Verification is real: a flipped data byte fails that entry's hash.
  std::string flipped = b;
  flipped[layout.entries[2].data_offset + 7] ^= 0x40;
  write_all(dir / "flipped.ait", flipped);
  auto damaged = ArchiveReader::open(dir / "flipped.ait");
  ASSERT_TRUE(damaged.ok()) << damaged.status().to_string();
  EXPECT_EQ(damaged->read(files[1].path, files[1]).status().code(), StatusCode::kCorrupt);
}

TEST(ZipArchiveTest, TamperedZip64FieldsRejected) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  write_sample(dir, path, {"last"}, {.force_zip64 = true});
  const std::string original = read_all(path);
  const Zip64Layout t = walk_forced_zip64(original);
  const Zip64Entry& plan = t.entries[2];
  ASSERT_EQ(plan.name, "modules/0/graphs/0/backend/tensorrt/model.plan");
  const std::string bad = "Checkpoint '" + dir / "patched.ait" + "' is corrupt: ";
  const std::string entry = "entry '" + plan.name + "'";

  auto open_patched = [&](const std::function<void(std::string&)>& patch) {
    std::string b = original;
    patch(b);
    write_all(dir / "patched.ait", b);
    return ArchiveReader::open(dir / "patched.ait").status();
  };
  struct Case {
    const char* what;
    std::function<void(std::string&)> patch;
    StatusCode code;
    std::string message;  // expected to be contained in the status message
  };
  const uint64_t huge = 0xFFFFFFFFFFFFFF00ull;  // sums with it overflow 64 bits
  const std::vector<Case> cases = {
      {"locator points outside the file", [&](std::string& b) { set64(b, t.locator + 8, b.size() + 100); },
       StatusCode::kCorrupt,
       bad + "the ZIP64 end-of-central-directory locator points to offset " +
           std::to_string(original.size() + 100)},
      {"locator points at huge offset", [&](std::string& b) { set64(b, t.locator + 8, huge); },
       StatusCode::kCorrupt, "locator points to offset"},
      {"locator points at a local header", [&](std::string& b) { set64(b, t.locator + 8, 0); },
       StatusCode::kCorrupt, bad + "bad ZIP64 end record signature at offset 0"},
      {"locator says two disks", [&](std::string& b) { set32(b, t.locator + 16, 2); },
       StatusCode::kUnsupported, "multi-disk archive (ZIP64 locator: disk 0 of 2)"},
      {"ZIP64 end record on disk 1", [&](std::string& b) { set32(b, t.record + 16, 1); },
       StatusCode::kUnsupported, "multi-disk"},
      {"ZIP64 end record size too small", [&](std::string& b) { set64(b, t.record + 4, 40); },
       StatusCode::kCorrupt, "ZIP64 end record size field is 40, expected at least 44"},
      {"ZIP64 end record with extensible data", [&](std::string& b) { set64(b, t.record + 4, 52); },
       StatusCode::kUnsupported, "extensible data sector (8 bytes)"},
      {"central directory offset beyond the file",
       [&](std::string& b) { set64(b, t.record + 48, uint64_t{1} << 40); }, StatusCode::kCorrupt,
       "extends past the ZIP64 end record at " + std::to_string(t.record)},
      {"central directory size overflows", [&](std::string& b) { set64(b, t.record + 40, huge); },
       StatusCode::kCorrupt, "extends past the ZIP64 end record"},
      {"entry count beyond the central directory",
       [&](std::string& b) {
         set64(b, t.record + 24, uint64_t{1} << 60);
         set64(b, t.record + 32, uint64_t{1} << 60);
       },
       StatusCode::kCorrupt, "the end record counts 1152921504606846976 entries"},
      {"classic count disagrees",
       [&](std::string& b) {
         set16(b, t.end + 8, 3);
         set16(b, t.end + 10, 3);
       },
       StatusCode::kCorrupt,
       "the end record's entries on this disk (3) disagrees with the ZIP64 end record's (5)"},
      {"central ZIP64 field too short",
       [&](std::string& b) {
         set16(b, plan.central_extra + 2, 16);  // drops the offset; an unrelated field fills its 8 bytes
         set16(b, plan.central_extra + 20, 0xCAFE);
         set16(b, plan.central_extra + 22, 4);
       },
       StatusCode::kCorrupt,
       bad + entry +
           " (central directory): ZIP64 extra field holds 16 bytes, expected 24 (the original size, the "
           "compressed size and the local header offset)"},
      {"local ZIP64 field too short",
       [&](std::string& b) {
         set16(b, plan.local_extra + 2, 8);
         set16(b, plan.local_extra + 12, 0xCAFE);
         set16(b, plan.local_extra + 14, 4);
       },
       StatusCode::kCorrupt,
       bad + entry +
           " (local header): ZIP64 extra field holds 8 bytes, expected 16 (the original size and the "
           "compressed size)"},
      {"central ZIP64 field missing", [&](std::string& b) { set16(b, plan.central_extra, 0xCAFE); },
       StatusCode::kCorrupt, entry + " (central directory): no ZIP64 extra field, but the header defers"},
      {"extra field overruns the extra area", [&](std::string& b) { set16(b, plan.central_extra + 2, 200); },
       StatusCode::kCorrupt,
       "extra field 0x0001 at byte 0 of the extra area declares 200 bytes, but only 24 remain"},
      {"disk start sentinel without its value",
       [&](std::string& b) { set16(b, plan.central_offset + 34, 0xFFFF); }, StatusCode::kCorrupt,
       "holds 24 bytes, expected 28"},
      {"local and central sizes disagree",
       [&](std::string& b) {
         set64(b, plan.local_extra + 4, plan.size + 1);
         set64(b, plan.local_extra + 12, plan.size + 1);
       },
       StatusCode::kCorrupt,
       bad + entry + ": local and central sizes differ (local 100001/100001, central 100000/100000"},
      {"central sizes disagree", [&](std::string& b) { set64(b, plan.central_extra + 4, plan.size + 1); },
       StatusCode::kCorrupt, entry + " is stored but its sizes differ (compressed 100000, original 100001)"},
      {"local header offset beyond the end of the file",
       [&](std::string& b) { set64(b, plan.central_extra + 20, b.size() + 4096); }, StatusCode::kCorrupt,
       bad + entry + ": local header offset " + std::to_string(original.size() + 4096) +
           " lies beyond the entry area"},
      {"local header offset overflows", [&](std::string& b) { set64(b, plan.central_extra + 20, huge); },
       StatusCode::kCorrupt, ": local header offset " + std::to_string(huge)},
      {"entry size overflows",
       [&](std::string& b) {
         for (size_t at : {plan.central_extra + 4, plan.central_extra + 12, plan.local_extra + 4,
                           plan.local_extra + 12}) {
           set64(b, at, huge);
         }
       },
       StatusCode::kCorrupt, ": data (" + std::to_string(huge) + " bytes at offset"},
  };
  for (const Case& c : cases) {
    const Status s = open_patched(c.patch);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.to_string();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.what << ": " << s.message();
  }
  EXPECT_TRUE(open_patched([](std::string&) {}).ok());
}

// More than 65534 entries need the ZIP64 end record (the classic count is 16 bits, 0xFFFF being
// the sentinel); the entries themselves stay plain. 65534 entries do not.
TEST(ZipArchiveTest, Zip64EndRecordOnlyPastTheEntryCountLimit) {
  TempDir dir;
  for (const size_t total : {size_t{65534}, size_t{65535}}) {
    const std::string path = dir / ("count-" + std::to_string(total) + ".ait");
    auto writer = ArchiveWriter::create(path);
    ASSERT_TRUE(writer.ok());
    for (size_t i = 1; i < total; ++i) ASSERT_TRUE(writer->add_bytes("e/" + std::to_string(i), "").ok());
    const auto files = writer->files();
    ASSERT_TRUE(writer->finish("{}").ok());
    const std::string b = read_all(path);
    const size_t end = b.size() - 22;
    const bool zip64 = total > 65534;
    EXPECT_EQ(le32(b, end - 20) == 0x07064b50u, zip64) << total;
    EXPECT_EQ(le16(b, end + 10), zip64 ? 0xFFFF : total) << total;
    if (zip64) {
      const size_t record = end - 20 - 56;
      EXPECT_EQ(le64(b, record + 32), total);
      EXPECT_EQ(le32(b, end + 16), le64(b, record + 48)) << "the central directory offset fits in 32 bits";
      const size_t first_central = le32(b, end + 16);
      EXPECT_EQ(le16(b, first_central + 30), 0) << "entries need no ZIP64 extra field";
      EXPECT_EQ(le16(b, first_central + 6), 10);
    }
    auto reader = ArchiveReader::open(path);
    ASSERT_TRUE(reader.ok()) << total << ": " << reader.status().to_string();
    EXPECT_EQ(reader->entry_names().size(), total);
    EXPECT_TRUE(reader->check_listed(files).ok());
    EXPECT_TRUE(reader->read(files.back().path, files.back()).ok());
  }
}

// A real archive past 4 GiB: an entry of 4 GiB + 1 MiB (sizes in ZIP64) followed by one whose
// header starts beyond 4 GiB (offset in ZIP64), and the central directory there too. The source is a
// sparse file and everything streams, so it needs ~4.1 GiB of disk in TMPDIR but little memory.
TEST(ZipArchiveTest, LargeArchiveBeyond4GiB) {
  const char* opt_in = std::getenv("AITUNE_TEST_LARGE_ZIP");
  if (opt_in == nullptr || std::string(opt_in) != "1") {
    GTEST_SKIP() << "writes a > 4 GiB archive; set AITUNE_TEST_LARGE_ZIP=1 to run it";
  }
  TempDir dir;
  const uint64_t big_size = (uint64_t{4} << 30) + (uint64_t{1} << 20);
  {
    const int fd = ::open((dir / "big.src").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(big_size)), 0);
    ASSERT_EQ(::pwrite(fd, "tail", 4, static_cast<off_t>(big_size - 4)), 4);
    ::close(fd);
  }
  const std::string path = dir / "large.ait";
  std::vector<FileRecord> files;
  {
    auto writer = ArchiveWriter::create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->add_bytes("small/first.json", "{}").ok());
    ASSERT_TRUE(writer->add_file("weights/big.safetensors", dir / "big.src").ok());
    ASSERT_TRUE(writer->add_bytes("small/after.json", "after 4 GiB").ok());
    files = writer->files();
    const Status s = writer->finish(kManifest);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  fs::remove(dir / "big.src");
  EXPECT_GT(fs::file_size(path), big_size);
  auto reader = ArchiveReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  ASSERT_TRUE(reader->check_listed(files).ok());
  EXPECT_EQ(reader->entry_size("weights/big.safetensors"), big_size);
  for (const auto& f : files) {
    auto data = reader->read(f.path, f);
    ASSERT_TRUE(data.ok()) << f.path << ": " << data.status().to_string();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data->data()) % 64, 0u) << f.path;
  }
  EXPECT_EQ(*reader->read(files[2].path, files[2]), "after 4 GiB");
  EXPECT_EQ(reader->read(files[1].path, files[1])->substr(big_size - 4), "tail");
}

}  // namespace
}  // namespace aitune

namespace aitune {
namespace {

TEST(ZipArchiveHostileTest, ThreadsSavingToOnePathEachWriteAWholeArchive) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        auto writer = ArchiveWriter::create(path);
        const std::string data(1000 + t, static_cast<char>('a' + t));
        if (!writer.ok() || !writer->add_bytes("data", data).ok() || !writer->finish(kManifest).ok())
          ++failures;
        auto reader = ArchiveReader::open(path);  // whatever is at the path is a whole archive
        if (!reader.ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ZipArchiveHostileTest, DamagedManifestIsRefusedByItsCrc) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  {
    auto writer = ArchiveWriter::create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->finish(R"({"format": "aitune.checkpoint", "files": []})").ok());
  }
  std::string bytes = read_all(path);
  const size_t at = bytes.find("aitune.checkpoint");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'A';  // same size, one byte changed
  write_all(path, bytes);
  auto reader = ArchiveReader::open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(reader.status().message().find("manifest.json does not match its CRC-32"), std::string::npos)
      << reader.status().message();
}

TEST(ZipArchiveHostileTest, AFifoIsRefusedNotWaitedOn) {
  TempDir dir;
  const std::string path = dir / "model.ait";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto reader = ArchiveReader::open(path);  // with a blocking open this never returns
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("is not a regular file"), std::string::npos)
      << reader.status().message();
}

}  // namespace
}  // namespace aitune
