#include "checkpoint/backend_names.h"

#include <gtest/gtest.h>

#include <set>

namespace aitune {
namespace {

TEST(BackendNames, EveryBuiltInClassPathHasItsStableName) {
  const auto& names = legacy_backend_names();
  EXPECT_EQ(names.size(), 7u);
  std::set<std::string> stable;
  for (const auto& [path, name] : names) stable.insert(name);
  EXPECT_EQ(stable,
            (std::set<std::string>{"torch_eager", "torch_inductor_jit", "torch_inductor_aot", "onnx_runtime",
                                   "tensorrt", "torch_tensorrt_jit", "torch_tensorrt_aot"}));
  EXPECT_EQ(backend_name_for_class_path(
                "aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend.TorchInductorAotBackend"),
            "torch_inductor_aot");
  EXPECT_EQ(backend_name_for_class_path("aitune.torch.backend.tensorrt.backend.TensorRTBackend"), "tensorrt");
}

TEST(BackendNames, AnUnknownClassPathIsACustomName) {
  EXPECT_EQ(backend_name_for_class_path("my_pkg.backends.MyBackend"), "custom:my_pkg.backends.MyBackend");
  // A re-exporting alias was never written (the defining module is): it is not in the table.
  EXPECT_EQ(backend_name_for_class_path("aitune.torch.backend.tensorrt.tensorrt_backend.TensorRTBackend"),
            "custom:aitune.torch.backend.tensorrt.tensorrt_backend.TensorRTBackend");
}

}  // namespace
}  // namespace aitune
