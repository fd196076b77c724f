// GPU-free tests of the CUDA-graph runner's cache policy: capture keys, the LRU and the bounded list
// of uncapturable keys.
#include "runners/capture_cache.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace aitune {
namespace {

CaptureKey key_of(std::vector<int64_t> sizes, c10::ScalarType dtype = c10::kFloat, bool contiguous = true) {
  CaptureKey key;
  key.device_index = 0;
  key.add(dtype, 0, contiguous, sizes);
  key.finish();
  return key;
}

struct Captured {
  int id;
};

TEST(CaptureKeyTest, EqualOnlyForTheSameSignature) {
  EXPECT_EQ(key_of({8, 3}), key_of({8, 3}));
  EXPECT_EQ(key_of({8, 3}).hash, key_of({8, 3}).hash);
  EXPECT_FALSE(key_of({8, 3}) == key_of({3, 8}));
  EXPECT_FALSE(key_of({8, 3}) == key_of({8, 3}, c10::kHalf));
  EXPECT_FALSE(key_of({8, 3}) == key_of({8, 3}, c10::kFloat, /*contiguous=*/false));
  EXPECT_FALSE(key_of({8}) == key_of({8, 1}));
}

TEST(CaptureKeyTest, DescribesEveryInput) {
  CaptureKey key;
  key.add(c10::kFloat, 0, true, {8, 3});
  key.add(c10::kLong, 0, false, {8});
  key.add(c10::kHalf, 0, true, {});
  key.finish();
  EXPECT_EQ(describe_capture_key(key),
            "(float32[8, 3] cuda:0, int64[8] cuda:0 non-contiguous, float16[] cuda:0)");
}

TEST(CaptureKeyTest, OnlyCudaInputsOnOneDeviceHaveAKey) {
  EXPECT_FALSE(make_capture_key({}).has_value());
  EXPECT_FALSE(make_capture_key({at::zeros({2})}).has_value());
  EXPECT_FALSE(make_capture_key({at::Tensor()}).has_value());
}

TEST(CaptureCacheTest, EvictsTheLeastRecentlyUsedBeforeAddingBeyondCapacity) {
  CaptureCache<Captured> cache(2);
  EXPECT_FALSE(cache.make_room());
  cache.insert(key_of({1}), std::make_unique<Captured>(Captured{1}));
  EXPECT_FALSE(cache.make_room());
  cache.insert(key_of({2}), std::make_unique<Captured>(Captured{2}));
  ASSERT_NE(cache.find(key_of({1})), nullptr);  // 1 is now more recent than 2
  EXPECT_TRUE(cache.make_room());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.find(key_of({2})), nullptr);
  ASSERT_NE(cache.find(key_of({1})), nullptr);
  EXPECT_EQ(cache.find(key_of({1}))->id, 1);
  Captured& third = cache.insert(key_of({3}), std::make_unique<Captured>(Captured{3}));
  EXPECT_EQ(third.id, 3);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_TRUE(cache.make_room());  // 1 was used before 3 was added
  EXPECT_EQ(cache.find(key_of({1})), nullptr);
  EXPECT_NE(cache.find(key_of({3})), nullptr);
}

TEST(CaptureCacheTest, UncapturableKeysAreBoundedOldestFirst) {
  CaptureCache<Captured> cache(1);
  for (int64_t i = 0; i < static_cast<int64_t>(kMaxUncapturableKeys); ++i)
    cache.mark_uncapturable(key_of({i}));
  EXPECT_TRUE(cache.is_uncapturable(key_of({0})));
  EXPECT_FALSE(cache.is_uncapturable(key_of({1000})));
  cache.mark_uncapturable(key_of({1000}));
  EXPECT_FALSE(cache.is_uncapturable(key_of({0})));  // the oldest went
  EXPECT_TRUE(cache.is_uncapturable(key_of({1})));
  EXPECT_TRUE(cache.is_uncapturable(key_of({1000})));
  EXPECT_EQ(cache.size(), 0u);  // never captured
}

}  // namespace
}  // namespace aitune
