// AotiRunner: serves a `model.pt2` AOTInductor package (docs/reference/backends.md#per-backend-behaviour
// TorchInductorAotBackend) through libtorch's AOTIModelPackageLoader, from Python and from the C++ runtime
// alike. Inputs are the exported program's tensor inputs in its own order (the backend maps aitune's
// flattening order onto it); outputs are the exported program's flat outputs.
//
// Thread-safe: one mutex around run (docs/reference/dispatch.md#threads-and-streams). Never throws: library
// exceptions become a kBackendError Status carrying the library's text.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "runners/runner.h"

namespace torch::inductor {
class AOTIModelPackageLoader;
}  // namespace torch::inductor

namespace aitune {

class AotiRunner : public Runner {
 public:
  // Key of the package metadata entry (inductor config aot_inductor.metadata) in which aitune
  // records the number of tensor inputs, so a wrong call is rejected instead of reading past
  // the input array. Packages without it are accepted; the count is then not checked.
  static constexpr const char* kNumInputsMetadataKey = "aitune_num_inputs";

  // Loads `package_path` (a .pt2 written by torch._inductor.aoti_compile_and_package).
  // `device_index` selects the CUDA device for a CUDA package; -1 means the CPU for a CPU
  // package (and the current device for a CUDA one).
  static StatusOr<std::unique_ptr<AotiRunner>> load(const std::string& package_path, int device_index);

  ~AotiRunner() override;
  AotiRunner(const AotiRunner&) = delete;
  AotiRunner& operator=(const AotiRunner&) = delete;

  StatusOr<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) override;
  std::string describe() const override;

  const std::string& package_path() const { return package_path_; }
  // "cpu" or "cuda:N": the device the package runs on.
  std::string device() const;
  bool is_cuda() const { return is_cuda_; }
  int device_index() const { return device_index_; }
  // Number of tensor inputs, or -1 when the package does not record it.
  int num_inputs() const { return num_inputs_; }
  // [in_spec, out_spec]: the exported program's pytree specs, serialised by torch
  // (torch.utils._pytree.treespec_loads reads them).
  const std::vector<std::string>& call_spec() const { return call_spec_; }
  const std::unordered_map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  AotiRunner(std::string package_path, std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader,
             bool is_cuda, int device_index, int num_inputs, std::vector<std::string> call_spec,
             std::unordered_map<std::string, std::string> metadata);

  std::string package_path_;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
  bool is_cuda_;
  int device_index_;
  int num_inputs_;
  std::vector<std::string> call_spec_;
  std::unordered_map<std::string, std::string> metadata_;
  std::mutex mutex_;
};

}  // namespace aitune
