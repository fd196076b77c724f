#include "checkpoint/backend_names.h"

namespace aitune {

const std::map<std::string, std::string, std::less<>>& legacy_backend_names() {
  // The class paths format-1 writers stored: `type(backend).__module__ + "." + __qualname__`, so
  // the defining module, never a re-exporting alias.
  static const std::map<std::string, std::string, std::less<>> names = {
      {"aitune.torch.backend.torch_eager.torch_eager_backend.TorchEagerBackend", "torch_eager"},
      {"aitune.torch.backend.torch_inductor_jit.torch_inductor_jit_backend.TorchInductorJitBackend",
       "torch_inductor_jit"},
      {"aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend.TorchInductorAotBackend",
       "torch_inductor_aot"},
      {"aitune.torch.backend.onnx_runtime.onnx_runtime_backend.ONNXRuntimeBackend", "onnx_runtime"},
      {"aitune.torch.backend.tensorrt.backend.TensorRTBackend", "tensorrt"},
      {"aitune.torch.backend.torch_tensorrt_jit.torch_tensorrt_jit_backend.TorchTensorRTJitBackend",
       "torch_tensorrt_jit"},
      {"aitune.torch.backend.torch_tensorrt_aot.torch_tensorrt_aot_backend.TorchTensorRTAotBackend",
       "torch_tensorrt_aot"},
  };
  return names;
}

std::string backend_name_for_class_path(std::string_view class_path) {
  const auto& names = legacy_backend_names();
  const auto it = names.find(class_path);
  return it != names.end() ? it->second : "custom:" + std::string(class_path);
}

}  // namespace aitune
