// Cost of the per-call graph identification on the dispatch hot path
// (docs/reference/dispatch.md#per-call-pipeline): rebuild the key of a call into a reused GraphKey, then look
// it up in a table of 8 tuned graphs.
#include <benchmark/benchmark.h>

#include <array>
#include <string>
#include <vector>

#include "spec/graph_key.h"
#include "spec/graph_table.h"

namespace aitune {
namespace {

constexpr int kNumGraphs = 8;
constexpr int kMatchingGraph = 5;

// forward(x, y, mask, pos); `variant` changes the rank of `pos` so each graph has its own key.
void add_four_tensor_call(GraphKey& key, int variant) {
  static const std::array<std::string, 4> kNames = {"x", "y", "mask", "pos"};
  static const std::array<int64_t, 4> kRanks = {4, 4, 2, 1};
  key.add_container(ContainerKind::kArguments, kNames.size());
  for (size_t i = 0; i < kNames.size(); ++i) {
    key.add_key(kNames[i]);
    key.add_tensor(i + 1 == kNames.size() ? kRanks[i] + variant : kRanks[i]);
  }
}

// forward(inputs) with inputs = {"tensor_0": t0, ..., "tensor_15": t15}.
void add_sixteen_tensor_call(GraphKey& key, int variant) {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (int i = 0; i < 16; ++i) names.push_back("tensor_" + std::to_string(i));
    return names;
  }();
  key.add_container(ContainerKind::kArguments, 1);
  key.add_key("inputs");
  key.add_container(ContainerKind::kMapping, kNames.size());
  for (size_t i = 0; i < kNames.size(); ++i) {
    key.add_key(kNames[i]);
    key.add_tensor(i + 1 == kNames.size() ? 3 + variant : 3);
  }
}

template <void (*AddCall)(GraphKey&, int)>
void run_key_and_lookup(benchmark::State& state) {
  GraphTable table;
  for (int variant = 0; variant < kNumGraphs; ++variant) {
    GraphKey key;
    AddCall(key, variant);
    table.add(key);
  }
  GraphKey key;
  for (auto _ : state) {
    key.clear();
    AddCall(key, kMatchingGraph);
    auto found = table.find(key);
    benchmark::DoNotOptimize(found);
  }
  key.clear();
  AddCall(key, kMatchingGraph);
  if (table.find(key).size() != 1) state.SkipWithError("lookup did not find the matching graph");
}

void BM_GraphKeyAndLookup_4Tensors(benchmark::State& state) {
  run_key_and_lookup<add_four_tensor_call>(state);
}
void BM_GraphKeyAndLookup_16TensorsInDict(benchmark::State& state) {
  run_key_and_lookup<add_sixteen_tensor_call>(state);
}

BENCHMARK(BM_GraphKeyAndLookup_4Tensors)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_GraphKeyAndLookup_16TensorsInDict)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace
}  // namespace aitune
