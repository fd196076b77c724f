#include "spec/graph_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace aitune {
namespace {

GraphKey tensor_key(int64_t rank) {
  GraphKey key;
  key.add_container(ContainerKind::kArguments, 1);
  key.add_key("x");
  key.add_tensor(rank);
  return key;
}

std::vector<uint32_t> to_vector(std::span<const uint32_t> indices) {
  return {indices.begin(), indices.end()};
}

TEST(GraphTableTest, AddAndFind) {
  GraphTable table;
  EXPECT_EQ(table.add(tensor_key(2)), 0u);
  EXPECT_EQ(table.add(tensor_key(3)), 1u);
  EXPECT_EQ(table.add(tensor_key(4)), 2u);
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(to_vector(table.find(tensor_key(3))), (std::vector<uint32_t>{1}));
  EXPECT_EQ(to_vector(table.find(tensor_key(2))), (std::vector<uint32_t>{0}));
  EXPECT_EQ(table.key(2), tensor_key(4));
}

TEST(GraphTableTest, MissIsEmpty) {
  GraphTable table;
  EXPECT_TRUE(table.find(tensor_key(2)).empty());
  table.add(tensor_key(2));
  EXPECT_TRUE(table.find(tensor_key(5)).empty());
  EXPECT_TRUE(table.find(GraphKey()).empty());
}

TEST(GraphTableTest, DuplicateKeysReturnAllIndicesInOrder) {
  GraphTable table;
  table.add(tensor_key(2));
  table.add(tensor_key(3));
  table.add(tensor_key(2));
  table.add(tensor_key(4));
  table.add(tensor_key(2));
  EXPECT_EQ(to_vector(table.find(tensor_key(2))), (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(to_vector(table.find(tensor_key(3))), (std::vector<uint32_t>{1}));
}

TEST(GraphTableTest, FindWithReusedKey) {
  GraphTable table;
  table.add(tensor_key(2));
  table.add(tensor_key(3));
  GraphKey probe = tensor_key(7);
  probe.clear();
  probe.add_container(ContainerKind::kArguments, 1);
  probe.add_key("x");
  probe.add_tensor(3);
  EXPECT_EQ(to_vector(table.find(probe)), (std::vector<uint32_t>{1}));
}

}  // namespace
}  // namespace aitune
