// GPU-free tests of the dispatch core: the input check's verdicts and its error texts (which the
// Python dispatcher and the C++ runtime both show), the runner's input order and the outputs.
#include "dispatch/graph_dispatch.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace aitune::dispatch {
namespace {

InputRule rule_of(size_t leaf, std::string path, ShapeRange range, std::vector<int64_t> min_shape,
                  std::vector<int64_t> max_shape, std::vector<c10::ScalarType> dtypes = {c10::kFloat}) {
  InputRule rule;
  rule.leaf = leaf;
  rule.dtypes = std::move(dtypes);
  rule.path_repr = std::move(path);
  rule.tensor_name = "input_x";
  rule.range = range;
  rule.min_shape = std::move(min_shape);
  rule.max_shape = std::move(max_shape);
  return rule;
}

GraphDispatch graph_of(std::vector<InputRule> rules, std::shared_ptr<Runner> runner = nullptr,
                       std::vector<int64_t> order = {}) {
  return GraphDispatch("0", "m", "TorchInductorAotBackend()", std::move(rules), std::move(runner),
                       std::move(order), {"out"});
}

// Checks one tensor against rule 0; `reported` counts first exits from the envelope.
Status check(const GraphDispatch& graph, const at::Tensor& tensor, int* reported = nullptr) {
  return graph.check_inputs([&](size_t) -> const at::Tensor& { return tensor; },
                            [&](const InputRule&, const at::Tensor&) {
                              if (reported) ++*reported;
                            });
}

TEST(GraphDispatchTest, DtypeMismatchNamesBothDtypesTheInputAndTheGraph) {
  const GraphDispatch graph =
      graph_of({rule_of(0, "'x'", ShapeRange::kNone, {}, {}, {c10::kFloat, c10::kHalf})});
  const Status status = check(graph, at::zeros({2}, at::kDouble));
  EXPECT_EQ(status.code(), StatusCode::kProfileShape);
  EXPECT_EQ(
      status.message(),
      "Input dtype torch.float64 does not match tuned dtype torch.float32 or torch.float16 for input 'x' "
      "(tensor 'input_x') in module 'm', graph '0', backend TorchInductorAotBackend()");
  EXPECT_TRUE(check(graph, at::zeros({2}, at::kHalf)).ok());
}

TEST(GraphDispatchTest, ProfileRefusesAboveMaxWithUnboundedAxesPrintedAsNone) {
  const GraphDispatch graph = graph_of({rule_of(0, "'x'", ShapeRange::kProfile, {1, 6}, {4, kNoUpperBound})});
  EXPECT_TRUE(check(graph, at::zeros({4, 600})).ok());
  const Status status = check(graph, at::zeros({5, 6}));
  EXPECT_EQ(status.code(), StatusCode::kProfileShape);
  EXPECT_EQ(
      status.message(),
      "Input shape [5, 6] exceeds max profile shape [4, None] for input 'x' (tensor 'input_x'; profile min "
      "[1, 6], max [4, None]) in module 'm', graph '0', backend TorchInductorAotBackend()");
}

TEST(GraphDispatchTest, ProfileRefusesBelowMinAndAboveWinsWhenBoth) {
  const GraphDispatch graph =
      graph_of({rule_of(0, "('options', 'mask')", ShapeRange::kProfile, {2, 6}, {4, 6})});
  EXPECT_EQ(
      check(graph, at::zeros({1, 6})).message(),
      "Input shape [1, 6] is below min profile shape [2, 6] for input ('options', 'mask') (tensor 'input_x'; "
      "profile min [2, 6], max [4, 6]) in module 'm', graph '0', backend TorchInductorAotBackend()");
  EXPECT_EQ(check(graph, at::zeros({1, 7}))
                .message()
                .rfind("Input shape [1, 7] exceeds max profile shape [4, 6]", 0),
            0u);
  // The boundaries themselves are inside.
  EXPECT_TRUE(check(graph, at::zeros({2, 6})).ok());
  EXPECT_TRUE(check(graph, at::zeros({4, 6})).ok());
}

TEST(GraphDispatchTest, ProfileRefusesAnotherRank) {
  const GraphDispatch graph = graph_of({rule_of(0, "'x'", ShapeRange::kProfile, {1, 6}, {4, 6})});
  const Status status = check(graph, at::zeros({2, 6, 1}));
  EXPECT_EQ(status.code(), StatusCode::kProfileShape);
  EXPECT_EQ(
      status.message(),
      "Input shape [2, 6, 1] has rank 3, profile shape [1, 6] has rank 2 for input 'x' (tensor 'input_x'; "
      "profile min [1, 6], max [4, 6]) in module 'm', graph '0', backend TorchInductorAotBackend()");
}

TEST(GraphDispatchTest, EnvelopeIsReportedOnceAndNeverRefused) {
  const GraphDispatch graph = graph_of({rule_of(0, "'x'", ShapeRange::kEnvelope, {1, 6}, {4, 6})});
  int reported = 0;
  EXPECT_TRUE(check(graph, at::zeros({4, 6}), &reported).ok());
  EXPECT_EQ(reported, 0);
  EXPECT_TRUE(check(graph, at::zeros({9, 6}), &reported).ok());
  EXPECT_EQ(reported, 1);
  EXPECT_TRUE(check(graph, at::zeros({0, 6}), &reported).ok());
  EXPECT_EQ(reported, 1);  // once per input, across calls
  // The dtype is still checked after the envelope was reported.
  EXPECT_EQ(check(graph, at::zeros({9, 6}, at::kInt), &reported).code(), StatusCode::kProfileShape);
}

TEST(GraphDispatchTest, CopiesOfARuleShareTheReportedFlag) {
  const InputRule rule = rule_of(0, "'x'", ShapeRange::kEnvelope, {1}, {2});
  const GraphDispatch first = graph_of({rule});
  const GraphDispatch second = graph_of({rule});  // a dispatcher rebuilt on activation
  int reported = 0;
  EXPECT_TRUE(check(first, at::zeros({3}), &reported).ok());
  EXPECT_TRUE(check(second, at::zeros({3}), &reported).ok());
  EXPECT_EQ(reported, 1);
}

TEST(GraphDispatchTest, NoRangeAcceptsAnyShape) {
  const GraphDispatch graph = graph_of({rule_of(0, "'x'", ShapeRange::kNone, {}, {})});
  int reported = 0;
  EXPECT_TRUE(check(graph, at::zeros({7, 1, 3}), &reported).ok());
  EXPECT_EQ(reported, 0);
}

TEST(GraphDispatchTest, TheInlineFastPathAgreesWithTheFullCheck) {
  const std::vector<InputRule> rules = {
      rule_of(0, "'x'", ShapeRange::kNone, {}, {}),
      rule_of(0, "'x'", ShapeRange::kEnvelope, {1, 6}, {4, 6}),
      rule_of(0, "'x'", ShapeRange::kProfile, {1, 6}, {4, kNoUpperBound}),
  };
  const std::vector<at::Tensor> tensors = {
      at::zeros({2, 6}),    at::zeros({5, 6}), at::zeros({0, 6}),          at::zeros({2, 9}),
      at::zeros({2, 6, 1}), at::zeros({6}),    at::zeros({2, 6}, at::kInt)};
  for (const InputRule& rule : rules) {
    for (const at::Tensor& tensor : tensors) {
      const GraphDispatch graph = graph_of({rule_of(0, "'x'", rule.range, rule.min_shape, rule.max_shape)});
      const bool passes =
          GraphDispatch::passes(graph.rules()[0], tensor);  // first: check_input marks a report
      bool report_outside = false;
      const Status status = graph.check_input(graph.rules()[0], tensor, report_outside);
      EXPECT_EQ(passes, status.ok() && !report_outside)
          << static_cast<int>(rule.range) << " " << tensor.sizes() << " " << status.to_string();
    }
  }
}

TEST(GraphDispatchTest, ChecksStopAtTheFirstFailingRuleInOrder) {
  std::vector<InputRule> rules = {rule_of(0, "'a'", ShapeRange::kProfile, {1}, {2}),
                                  rule_of(1, "'b'", ShapeRange::kNone, {}, {}, {c10::kLong})};
  const GraphDispatch graph = graph_of(std::move(rules));
  const std::vector<at::Tensor> tensors = {at::zeros({3}), at::zeros({1})};  // both wrong
  std::vector<size_t> asked;
  const Status status = graph.check_inputs(
      [&](size_t i) -> const at::Tensor& {
        asked.push_back(i);
        return tensors[i];
      },
      [](const InputRule&, const at::Tensor&) {});
  EXPECT_NE(status.message().find("for input 'a'"), std::string::npos) << status.message();
  EXPECT_EQ(asked, std::vector<size_t>{0});
}

class Reversing final : public Runner {
 public:
  StatusOr<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) override {
    return std::vector<at::Tensor>(inputs.rbegin(), inputs.rend());
  }
  std::string describe() const override { return "Reversing"; }
};

TEST(GraphDispatchTest, RunnerInputsFollowTheInputOrder) {
  std::vector<InputRule> rules = {rule_of(0, "'a'", ShapeRange::kNone, {}, {}),
                                  rule_of(1, "'b'", ShapeRange::kNone, {}, {})};
  const GraphDispatch graph = graph_of(std::move(rules), std::make_shared<Reversing>(), {1, 0, 1});
  ASSERT_TRUE(graph.check_input_order().ok());
  const std::vector<at::Tensor> tensors = {at::zeros({1}), at::ones({1})};
  const std::vector<at::Tensor> inputs = graph.runner_inputs([&](size_t i) { return tensors[i]; });
  ASSERT_EQ(inputs.size(), 3u);
  EXPECT_TRUE(inputs[0].is_same(tensors[1]));
  EXPECT_TRUE(inputs[1].is_same(tensors[0]));
  auto outputs = graph.run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status().to_string();
  EXPECT_TRUE((*outputs)[0].is_same(tensors[1]));
  EXPECT_TRUE((*outputs)[1].is_same(tensors[0]));
  EXPECT_EQ(graph.output_name(0), "out");
  EXPECT_EQ(graph.output_name(1), "output[1]");
}

TEST(GraphDispatchTest, InputOrderNamingAMissingInputIsCorrupt) {
  const GraphDispatch graph = graph_of({rule_of(0, "'a'", ShapeRange::kNone, {}, {})}, nullptr, {0, 2});
  const Status status = graph.check_input_order();
  EXPECT_EQ(status.code(), StatusCode::kCorrupt);
  EXPECT_EQ(status.message(), "input_order of graph '0' names tensor input 2 of 1");
  EXPECT_EQ(
      graph_of({rule_of(0, "'a'", ShapeRange::kNone, {}, {})}, nullptr, {-1}).check_input_order().code(),
      StatusCode::kCorrupt);
}

TEST(GraphDispatchTest, RunWithoutANativeRunnerIsUnavailable) {
  const GraphDispatch graph = graph_of({});
  auto outputs = graph.run({});
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.status().code(), StatusCode::kBackendUnavailable);
  EXPECT_EQ(outputs.status().message(), "graph '0' of module 'm' has no native runner");
}

TEST(GraphDispatchTest, ProfileTextPrintsUnboundedAsNone) {
  EXPECT_EQ(profile_text({}), "[]");
  EXPECT_EQ(profile_text({1, kNoUpperBound}), "[1, None]");
}

}  // namespace
}  // namespace aitune::dispatch
