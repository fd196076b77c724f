#include "runners/cuda_graph_runner.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <thread>

#if __has_include(<c10/cuda/CUDAGuard.h>) && __has_include(<cuda_runtime_api.h>)
#define AITUNE_TEST_HAS_CUDA 1
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#else
#define AITUNE_TEST_HAS_CUDA 0
#endif

namespace aitune {
namespace {

// y = x * 2 + 1 (and optionally x itself, an output that aliases an input). Counts its calls.
class AffineRunner : public Runner {
 public:
  explicit AffineRunner(bool also_return_input = false) : also_return_input_(also_return_input) {}
  StatusOr<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) override {
    ++calls;
    if (inputs.empty()) return invalid_argument("AffineRunner needs one input");
    std::vector<at::Tensor> out{inputs[0] * 2 + 1};
    if (also_return_input_) out.push_back(inputs[0]);
    return out;
  }
  std::string describe() const override { return "AffineRunner"; }
  std::atomic<int> calls{0};

 private:
  bool also_return_input_;
};

// Reads a value back to the host, which a CUDA graph cannot capture.
class HostSyncRunner : public Runner {
 public:
  StatusOr<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) override {
    ++calls;
    try {
      const double total = inputs[0].sum().item<double>();
      return std::vector<at::Tensor>{inputs[0] + total};
    } catch (const std::exception& e) {
      return Status(StatusCode::kBackendError, e.what());
    }
  }
  std::string describe() const override { return "HostSyncRunner"; }
  std::atomic<int> calls{0};
};

bool gpu() { return at::hasCUDA(); }
#define REQUIRE_GPU() \
  if (!gpu()) GTEST_SKIP() << "no CUDA device available: CUDA graph capture needs one"

at::Tensor cuda_randn(std::vector<int64_t> shape) { return at::randn(shape, at::device(at::kCUDA)); }

void expect_affine(const StatusOr<std::vector<at::Tensor>>& result, const at::Tensor& x) {
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  ASSERT_EQ(result->size(), 1u);
  EXPECT_TRUE(at::allclose((*result)[0].cpu(), (x * 2 + 1).cpu())) << "wrong output for shape " << x.sizes();
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// `reads(name)` must be true exactly for the values in `yes` (and false for `no` and unset).
void expect_env_switch(const char* name, bool (*reads)(), std::initializer_list<const char*> yes,
                       std::initializer_list<const char*> no) {
  for (const char* value : yes) {
    ScopedEnv env(name, value);
    EXPECT_TRUE(reads()) << name << "=" << value;
  }
  for (const char* value : no) {
    ScopedEnv env(name, value);
    EXPECT_FALSE(reads()) << name << "=" << value;
  }
  ScopedEnv unset(name, nullptr);
  EXPECT_FALSE(reads()) << name << " unset";
}

TEST(CudaGraphRunner, KillSwitchValues) {
  expect_env_switch("AITUNE_DISABLE_CUDA_GRAPHS", &CudaGraphRunner::cuda_graphs_disabled_by_env,
                    {"1", "true", "True", "yes", "Yes", "YES"}, {"0", "false", "", "no"});
}

TEST(CudaGraphRunner, InGraphCopySwitchValues) {
  expect_env_switch("AITUNE_CUDA_GRAPH_COPY_NODES", &CudaGraphRunner::in_graph_copies_disabled_by_env,
                    {"0", "false", "False", "no", "No", "NO"}, {"1", "true", "", "yes"});
}

TEST(CudaGraphRunner, DisabledRunnerForwardsToInner) {
  auto inner = std::make_shared<AffineRunner>();
  CudaGraphRunner runner(inner, CudaGraphOptions{8, true, false});
  at::Tensor x = at::randn({3, 4});
  expect_affine(runner.run({x}), x);
  expect_affine(runner.run({x}), x);
  EXPECT_EQ(inner->calls, 2);
  const auto stats = runner.stats();
  EXPECT_EQ(stats.direct_calls, 2u);
  EXPECT_EQ(stats.hits + stats.misses + stats.captures, 0u);
  EXPECT_EQ(runner.describe(), "CudaGraphRunner(AffineRunner)");
}

TEST(CudaGraphRunner, CpuInputsRunThroughInner) {
  auto inner = std::make_shared<AffineRunner>();
  CudaGraphRunner runner(inner, CudaGraphOptions{});
  at::Tensor x = at::randn({5});
  expect_affine(runner.run({x}), x);
  EXPECT_EQ(runner.stats().direct_calls, 1u);
  EXPECT_EQ(runner.num_cached_graphs(), 0u);
}

TEST(CudaGraphRunner, InnerErrorsPassThrough) {
  CudaGraphRunner runner(std::make_shared<AffineRunner>(), CudaGraphOptions{8, true, false});
  auto result = runner.run({});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  CudaGraphRunner no_inner(nullptr, CudaGraphOptions{});
  EXPECT_EQ(no_inner.run({at::zeros({1})}).status().code(), StatusCode::kInvalidArgument);
}

TEST(CudaGraphRunnerGpu, CaptureAndReplayMatchInner) {
  REQUIRE_GPU();
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  auto inner = std::make_shared<AffineRunner>();
  CudaGraphRunner runner(inner, CudaGraphOptions{});
  at::Tensor x1 = cuda_randn({4, 8});
  expect_affine(runner.run({x1}), x1);
  EXPECT_EQ(inner->calls, 2);  // one warmup, one capture
  for (int i = 0; i < 5; ++i) {
    at::Tensor x = cuda_randn({4, 8});
    expect_affine(runner.run({x}), x);
  }
  EXPECT_EQ(inner->calls, 2) << "replays must not call the inner runner";
  const auto stats = runner.stats();
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.captures, 1u);
  EXPECT_EQ(stats.hits, 5u);
  EXPECT_EQ(stats.capture_failures, 0u);
  EXPECT_TRUE(runner.last_warning().empty());
}

TEST(CudaGraphRunnerGpu, CountersPerShape) {
  REQUIRE_GPU();
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  auto inner = std::make_shared<AffineRunner>();
  CudaGraphRunner runner(inner, CudaGraphOptions{});
  for (auto shape : std::vector<std::vector<int64_t>>{{2, 3}, {2, 3}, {5}, {2, 3}, {5}}) {
    at::Tensor x = cuda_randn(shape);
    expect_affine(runner.run({x}), x);
  }
  // Dtype and contiguity are part of the key too.
  at::Tensor half = cuda_randn({2, 3}).to(at::kHalf);
  ASSERT_TRUE(runner.run({half}).ok());
  at::Tensor transposed = cuda_randn({3, 2}).t();
  expect_affine(runner.run({transposed}), transposed);
  const auto stats = runner.stats();
  EXPECT_EQ(stats.misses, 4u);
  EXPECT_EQ(stats.captures, 4u);
  EXPECT_EQ(stats.hits, 3u);
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(runner.num_cached_graphs(), 4u);
}

TEST(CudaGraphRunnerGpu, LruEvictsLeastRecentlyUsed) {
  REQUIRE_GPU();
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  CudaGraphRunner runner(std::make_shared<AffineRunner>(), CudaGraphOptions{2, true, true});
  at::Tensor a = cuda_randn({1}), b = cuda_randn({2}), c = cuda_randn({3});
  expect_affine(runner.run({a}), a);  // miss {a}
  expect_affine(runner.run({b}), b);  // miss {a, b}
  expect_affine(runner.run({a}), a);  // hit: a is now the most recent
  expect_affine(runner.run({c}), c);  // miss, evicts b -> {a, c}
  expect_affine(runner.run({a}), a);  // hit
  expect_affine(runner.run({b}), b);  // miss, evicts c -> {a, b}
  auto stats = runner.stats();
  EXPECT_EQ(stats.misses, 4u);
  EXPECT_EQ(stats.hits, 2u);
  EXPECT_EQ(stats.evictions, 2u);
  EXPECT_EQ(runner.num_cached_graphs(), 2u);
  expect_affine(runner.run({c}), c);  // miss again: c was evicted
  EXPECT_EQ(runner.stats().evictions, 3u);
  EXPECT_EQ(runner.num_cached_graphs(), 2u);
}

TEST(CudaGraphRunnerGpu, WithoutCloningOutputsAreTheStaticBuffers) {
  REQUIRE_GPU();
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  CudaGraphRunner runner(std::make_shared<AffineRunner>(), CudaGraphOptions{8, false, true});
  at::Tensor x1 = cuda_randn({16});
  auto r1 = runner.run({x1});
  expect_affine(r1, x1);
  at::Tensor x2 = cuda_randn({16});
  auto r2 = runner.run({x2});
  expect_affine(r2, x2);
  EXPECT_EQ((*r1)[0].data_ptr(), (*r2)[0].data_ptr());
  // The first result was overwritten by the second replay: that is the documented contract.
  EXPECT_TRUE(at::allclose((*r1)[0].cpu(), (x2 * 2 + 1).cpu()));

  CudaGraphRunner cloning(std::make_shared<AffineRunner>(), CudaGraphOptions{});
  auto c1 = cloning.run({x1});
  auto c2 = cloning.run({x2});
  ASSERT_TRUE(c1.ok() && c2.ok());
  EXPECT_NE((*c1)[0].data_ptr(), (*c2)[0].data_ptr());
  EXPECT_TRUE(at::allclose((*c1)[0].cpu(), (x1 * 2 + 1).cpu()));
}

TEST(CudaGraphRunnerGpu, StaticBufferPassedBackIsNotCopied) {
  REQUIRE_GPU();
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  // The second output aliases the input, i.e. it is the key's static input buffer.
  CudaGraphRunner runner(std::make_shared<AffineRunner>(true), CudaGraphOptions{8, false, true});
  at::Tensor x = cuda_randn({6});
  auto first = runner.run({x});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_EQ(first->size(), 2u);
  at::Tensor static_input = (*first)[1];
  EXPECT_TRUE(at::equal(static_input.cpu(), x.cpu()));
  static_input.fill_(3.0);  // the caller writes its input straight into the buffer
  auto second = runner.run({static_input});
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(at::allclose((*second)[0].cpu(), at::full({6}, 7.0)));
  EXPECT_EQ(runner.stats().hits, 1u);
}

TEST(CudaGraphRunnerGpu, OutputAliasingAnInputIsClonedFresh) {
  REQUIRE_GPU();
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  CudaGraphRunner runner(std::make_shared<AffineRunner>(true), CudaGraphOptions{});
  for (int i = 0; i < 3; ++i) {
    at::Tensor x = cuda_randn({4});
    auto r = runner.run({x});
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(at::allclose((*r)[0].cpu(), (x * 2 + 1).cpu()));
    EXPECT_TRUE(at::equal((*r)[1].cpu(), x.cpu()));
  }
}

TEST(CudaGraphRunnerGpu, CaptureFailureFallsBackToInner) {
  REQUIRE_GPU();
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  auto inner = std::make_shared<HostSyncRunner>();
  CudaGraphRunner runner(inner, CudaGraphOptions{});
  at::Tensor x = at::arange(4, at::device(at::kCUDA).dtype(at::kFloat));  // sum = 6
  for (int i = 0; i < 3; ++i) {
    auto r = runner.run({x});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(at::allclose((*r)[0].cpu(), (x + 6).cpu()));
  }
  const auto stats = runner.stats();
  EXPECT_EQ(stats.capture_failures, 1u);
  EXPECT_EQ(stats.captures, 0u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.direct_calls, 2u);
  EXPECT_EQ(runner.num_cached_graphs(), 0u);
  EXPECT_NE(runner.last_warning().find("HostSyncRunner"), std::string::npos) << runner.last_warning();
  EXPECT_NE(runner.last_warning().find("float32[4] cuda:0"), std::string::npos) << runner.last_warning();
  EXPECT_EQ(runner.last_warning().find('\n'), std::string::npos) << "one line: " << runner.last_warning();
  // The failed capture must not leave the process's CUDA generator in capture mode.
  EXPECT_NO_THROW(at::randn({8}, at::device(at::kCUDA)));
  // CUDA is still healthy, and other runners still capture.
  CudaGraphRunner healthy(std::make_shared<AffineRunner>(), CudaGraphOptions{});
  at::Tensor y = cuda_randn({4});
  expect_affine(healthy.run({y}), y);
  expect_affine(healthy.run({y}), y);
  EXPECT_EQ(healthy.stats().captures, 1u);
}

TEST(CudaGraphRunnerGpu, KillSwitchTurnsCapturingOff) {
  REQUIRE_GPU();
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", "1");
  auto inner = std::make_shared<AffineRunner>();
  CudaGraphRunner runner(inner, CudaGraphOptions{});
  at::Tensor x = cuda_randn({3});
  expect_affine(runner.run({x}), x);
  expect_affine(runner.run({x}), x);
  EXPECT_EQ(runner.stats().direct_calls, 2u);
  EXPECT_EQ(runner.stats().captures, 0u);
  EXPECT_EQ(inner->calls, 2);
}

TEST(CudaGraphRunnerGpu, NonContiguousInputsAndOutputsTakeTheGeneralCopy) {
  REQUIRE_GPU();
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  CudaGraphRunner runner(std::make_shared<AffineRunner>(), CudaGraphOptions{});
  for (int i = 0; i < 3; ++i) {
    const at::Tensor x = cuda_randn({32, 64}).t();  // same key each time: non-contiguous [64, 32]
    ASSERT_FALSE(x.is_contiguous());
    expect_affine(runner.run({x}), x);
  }
  EXPECT_EQ(runner.stats().captures, 1u);
  EXPECT_EQ(runner.stats().hits, 2u);
}

// Many replays queued behind a busy stream, each with its own input and keeping its output: the
// in-graph copy nodes are re-pointed per call while earlier launches still wait, and every call
// must read its own input and write its own fresh output (CUDA: re-pointing affects only later
// launches). Then the same with in-graph copies switched off, and without cloning.
TEST(CudaGraphRunnerGpu, InGraphCopiesFollowEachCallsTensors) {
  REQUIRE_GPU();
#if AITUNE_TEST_HAS_CUDA
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  for (const char* copy_nodes : {"1", "0"}) {
    ScopedEnv nodes("AITUNE_CUDA_GRAPH_COPY_NODES", copy_nodes);
    CudaGraphRunner runner(std::make_shared<AffineRunner>(), CudaGraphOptions{});
    ASSERT_TRUE(runner.run({at::zeros({512}, at::device(at::kCUDA))}).ok());  // capture
    std::vector<at::Tensor> xs;
    std::vector<at::Tensor> ys;
    at::cuda::sleep(100'000'000);  // the stream stays busy while the calls below are queued
    for (int i = 0; i < 32; ++i) {
      xs.push_back(at::full({512}, static_cast<double>(i), at::device(at::kCUDA)));
      auto r = runner.run({xs.back()});
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      ys.push_back((*r)[0]);
    }
    c10::cuda::device_synchronize();
    for (int i = 0; i < 32; ++i) {
      EXPECT_TRUE(at::equal(ys[i].cpu(), at::full({512}, 2.0 * i + 1)))
          << "call " << i << ", copy nodes " << copy_nodes;
    }
    EXPECT_EQ(runner.stats().in_graph_copies, std::string(copy_nodes) == "1" ? 2u : 0u);
    EXPECT_EQ(runner.stats().hits, 32u);
  }
  ScopedEnv nodes("AITUNE_CUDA_GRAPH_COPY_NODES", nullptr);
  CudaGraphRunner no_clone(std::make_shared<AffineRunner>(), CudaGraphOptions{8, false, true});
  const at::Tensor a = cuda_randn({64});
  expect_affine(no_clone.run({a}), a);
  const at::Tensor b = cuda_randn({64});
  expect_affine(no_clone.run({b}), b);
  EXPECT_EQ(no_clone.stats().in_graph_copies, 1u) << "only the input is copied by the graph without cloning";
#endif
}

TEST(CudaGraphRunnerGpu, CallOnAnotherStreamWaitsForTheLastReadOfTheBuffers) {
  REQUIRE_GPU();
#if AITUNE_TEST_HAS_CUDA
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  CudaGraphRunner runner(std::make_shared<AffineRunner>(), CudaGraphOptions{});
  const at::Tensor warm = at::zeros({256}, at::device(at::kCUDA));
  ASSERT_TRUE(runner.run({warm}).ok());  // captured on the default stream
  const c10::cuda::CUDAStream a = c10::cuda::getStreamFromPool();
  const c10::cuda::CUDAStream b = c10::cuda::getStreamFromPool();
  at::Tensor xa;
  at::Tensor xb;
  StatusOr<std::vector<at::Tensor>> ra = internal_error("not run");
  StatusOr<std::vector<at::Tensor>> rb = internal_error("not run");
  {
    c10::cuda::CUDAStreamGuard guard(a);
    xa = at::full({256}, 1.0, at::device(at::kCUDA));
    at::cuda::sleep(200'000'000);  // stream a is busy: its replay runs much later than b's copy-in
    ra = runner.run({xa});
  }
  {
    c10::cuda::CUDAStreamGuard guard(b);
    xb = at::full({256}, 7.0, at::device(at::kCUDA));
    rb = runner.run({xb});  // must not overwrite the static input before a's replay read it
  }
  c10::cuda::device_synchronize();
  expect_affine(ra, xa);
  expect_affine(rb, xb);
#endif
}

TEST(CudaGraphRunnerGpu, ConcurrentCallersGetTheirOwnResults) {
  REQUIRE_GPU();
  ScopedEnv env("AITUNE_DISABLE_CUDA_GRAPHS", nullptr);
  CudaGraphRunner runner(std::make_shared<AffineRunner>(), CudaGraphOptions{});
  constexpr int kThreads = 8;
  constexpr int kCalls = 40;
  std::atomic<int> wrong{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
#if AITUNE_TEST_HAS_CUDA
      // Half the threads call from their own stream, to exercise device-side ordering.
      std::optional<c10::cuda::CUDAStreamGuard> stream_guard;
      if (t % 2 == 1) stream_guard.emplace(c10::cuda::getStreamFromPool());
#endif
      const std::vector<int64_t> shape =
          t % 3 == 0 ? std::vector<int64_t>{64, 32} : std::vector<int64_t>{128};
      for (int i = 0; i < kCalls; ++i) {
        at::Tensor x = at::full(shape, static_cast<double>(t * 1000 + i), at::device(at::kCUDA));
        auto r = runner.run({x});
        if (!r.ok()) {
          ++failed;
          continue;
        }
        if (!at::equal((*r)[0].cpu(), (x * 2 + 1).cpu())) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
  const auto stats = runner.stats();
  EXPECT_EQ(stats.captures, 2u);
  EXPECT_EQ(stats.hits + stats.misses, static_cast<uint64_t>(kThreads * kCalls));
}

}  // namespace
}  // namespace aitune
