#include "spec/graph_key.h"

#include <gtest/gtest.h>

#include <functional>

namespace aitune {
namespace {

// forward(x, options={"mask": t, "scale": <value>}), built the way the recorder flattens a call.
GraphKey call_key(int64_t x_rank = 4, std::string_view mask_name = "mask", uint64_t scale_hash = 42) {
  GraphKey key;
  key.add_container(ContainerKind::kArguments, 2);
  key.add_key("x");
  key.add_tensor(x_rank);
  key.add_key("options");
  key.add_container(ContainerKind::kMapping, 2);
  key.add_key(mask_name);
  key.add_tensor(2);
  key.add_key("scale");
  key.add_value(scale_hash);
  return key;
}

GraphKey build(const std::function<void(GraphKey&)>& fill) {
  GraphKey key;
  fill(key);
  return key;
}

TEST(StableHashTest, KnownFnv1aVectors) {
  EXPECT_EQ(stable_hash(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(stable_hash("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(stable_hash("foobar"), 0x85944171f73967e8ULL);
  EXPECT_NE(stable_hash("ab"), stable_hash("ba"));
}

TEST(GraphKeyTest, SameStructureIsEqual) {
  GraphKey a = call_key();
  GraphKey b = call_key();
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.tokens(), b.tokens());
  EXPECT_NE(a.hash(), 0u);
}

TEST(GraphKeyTest, DifferentKeyNamesDiffer) {
  EXPECT_NE(call_key(4, "mask"), call_key(4, "attention_mask"));
  EXPECT_NE(call_key(4, "mask").hash(), call_key(4, "attention_mask").hash());
}

TEST(GraphKeyTest, DifferentRanksDiffer) {
  EXPECT_NE(call_key(4), call_key(3));
  EXPECT_NE(call_key(4).hash(), call_key(3).hash());
}

TEST(GraphKeyTest, DifferentValueHashesDiffer) {
  EXPECT_NE(call_key(4, "mask", 42), call_key(4, "mask", 43));
}

TEST(GraphKeyTest, DifferentIndicesDiffer) {
  auto items = [](int64_t index) {
    return build([&](GraphKey& key) {
      key.add_container(ContainerKind::kSequence, 1);
      key.add_index(index);
      key.add_tensor(2);
    });
  };
  EXPECT_EQ(items(0), items(0));
  EXPECT_NE(items(0), items(1));
}

TEST(GraphKeyTest, DifferentContainerSizesAndKindsDiffer) {
  auto container = [](ContainerKind kind, size_t size) {
    return build([&](GraphKey& key) { key.add_container(kind, size); });
  };
  EXPECT_NE(container(ContainerKind::kSequence, 2), container(ContainerKind::kSequence, 3));
  EXPECT_NE(container(ContainerKind::kSequence, 2), container(ContainerKind::kMapping, 2));
  EXPECT_NE(container(ContainerKind::kObject, 2), container(ContainerKind::kArguments, 2));
}

TEST(GraphKeyTest, LeafKindsAreDistinguished) {
  // Same payload, different leaf kind: the tag token keeps them apart.
  GraphKey tensor = build([](GraphKey& key) { key.add_tensor(1); });
  GraphKey value = build([](GraphKey& key) { key.add_value(1); });
  GraphKey index = build([](GraphKey& key) { key.add_index(1); });
  GraphKey prefill = build([](GraphKey& key) { key.add_llm_phase(true); });
  GraphKey decode = build([](GraphKey& key) { key.add_llm_phase(false); });
  GraphKey opaque = build([](GraphKey& key) { key.add_opaque_value(); });
  EXPECT_NE(tensor, value);
  EXPECT_NE(tensor, index);
  EXPECT_NE(tensor, prefill);
  EXPECT_NE(prefill, decode);
  EXPECT_NE(decode, opaque);
  EXPECT_NE(value, opaque);
}

TEST(GraphKeyTest, OrderMatters) {
  GraphKey ab = build([](GraphKey& key) {
    key.add_tensor(2);
    key.add_tensor(3);
  });
  GraphKey ba = build([](GraphKey& key) {
    key.add_tensor(3);
    key.add_tensor(2);
  });
  EXPECT_NE(ab, ba);
  EXPECT_NE(ab.hash(), ba.hash());
}

TEST(GraphKeyTest, TokenStreamIsTagThenPayload) {
  GraphKey key = build([](GraphKey& k) {
    k.add_key("x");
    k.add_tensor(4);
  });
  ASSERT_EQ(key.size(), 4u);
  EXPECT_EQ(key.tokens()[1], stable_hash("x"));
  EXPECT_EQ(key.tokens()[3], 4u);
  EXPECT_NE(key.tokens()[0], key.tokens()[2]);
}

TEST(GraphKeyTest, ClearKeepsCapacityAndEqualitySemantics) {
  GraphKey reused = call_key(3);
  const size_t capacity = reused.tokens().capacity();
  reused.clear();
  EXPECT_EQ(reused.size(), 0u);
  EXPECT_EQ(reused.hash(), GraphKey().hash());
  EXPECT_EQ(reused, GraphKey());
  EXPECT_EQ(reused.tokens().capacity(), capacity);

  reused.add_container(ContainerKind::kArguments, 2);
  reused.add_key("x");
  reused.add_tensor(4);
  reused.add_key("options");
  reused.add_container(ContainerKind::kMapping, 2);
  reused.add_key("mask");
  reused.add_tensor(2);
  reused.add_key("scale");
  reused.add_value(42);
  EXPECT_EQ(reused, call_key(4));
  EXPECT_EQ(reused.hash(), call_key(4).hash());
  EXPECT_NE(reused, call_key(3));
}

}  // namespace
}  // namespace aitune

namespace aitune {
namespace {

TEST(GraphKeyFromTokens, RebuildsAnEqualKeyWithTheSameHash) {
  GraphKey key;
  key.add_container(ContainerKind::kArguments, 2);
  key.add_key("x");
  key.add_key("mask");
  key.add_tensor(4);
  key.add_value(stable_hash("abc"));
  GraphKey copy = GraphKey::from_tokens(key.tokens());
  EXPECT_EQ(copy, key);
  EXPECT_EQ(copy.hash(), key.hash());
  std::vector<uint64_t> changed = key.tokens();
  changed.back() ^= 1;
  EXPECT_NE(GraphKey::from_tokens(changed), key);
}

}  // namespace
}  // namespace aitune
