#include "runners/aoti_runner.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <exception>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace aitune {
namespace {

Status backend_error(std::string message) { return {StatusCode::kBackendError, std::move(message)}; }
Status unavailable(std::string message) { return {StatusCode::kBackendUnavailable, std::move(message)}; }

// c10::Error::what() carries a C++ backtrace; the message alone is what users need.
std::string exception_text(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

std::string cuda_device_name(int index) { return "cuda:" + std::to_string(index); }

}  // namespace

AotiRunner::AotiRunner(std::string package_path,
                       std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader, bool is_cuda,
                       int device_index, int num_inputs, std::vector<std::string> call_spec,
                       std::unordered_map<std::string, std::string> metadata)
    : package_path_(std::move(package_path)),
      loader_(std::move(loader)),
      is_cuda_(is_cuda),
      device_index_(device_index),
      num_inputs_(num_inputs),
      call_spec_(std::move(call_spec)),
      metadata_(std::move(metadata)) {}

AotiRunner::~AotiRunner() = default;

StatusOr<std::unique_ptr<AotiRunner>> AotiRunner::load(const std::string& package_path, int device_index) {
  AITUNE_CHECK_ARG(!package_path.empty(), "AOTInductor package path is empty");
  AITUNE_CHECK_ARG(device_index >= -1,
                   "device_index must be -1 (CPU / current device) or a CUDA device index, got " +
                       std::to_string(device_index));
  std::error_code ec;
  if (!std::filesystem::is_regular_file(package_path, ec)) {
    return not_found("AOTInductor package not found: '" + package_path +
                     "' (expected a model.pt2 written by torch._inductor.aoti_compile_and_package)");
  }
  try {
    auto metadata =
        torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(package_path, "model");
    const auto device_it = metadata.find("AOTI_DEVICE_KEY");
    const std::string device_key = device_it == metadata.end() ? "cpu" : device_it->second;
    const bool is_cuda = device_key == "cuda";
    if (!is_cuda && device_key != "cpu") {
      return unsupported("AOTInductor package '" + package_path + "' targets device '" + device_key +
                         "'; aitune serves cpu and cuda packages");
    }
    if (!is_cuda && device_index != -1) {
      return invalid_argument("AOTInductor package '" + package_path +
                              "' was compiled for the CPU; load it with " + "device_index=-1, not " +
                              std::to_string(device_index));
    }
    int index = device_index;
    if (is_cuda) {
      if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) {
        return unavailable("AOTInductor package '" + package_path +
                           "' was compiled for CUDA, but CUDA is not available");
      }
      const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
      const int count = impl->deviceCount();
      if (count <= 0) {
        return unavailable("AOTInductor package '" + package_path +
                           "' was compiled for CUDA, but no CUDA device is visible");
      }
      if (index < 0) index = impl->getDevice().index();
      if (index >= count) {
        return invalid_argument("device_index " + std::to_string(index) +
                                " is out of range: " + std::to_string(count) + " CUDA device(s) visible");
      }
    }
    int num_inputs = -1;
    if (auto it = metadata.find(kNumInputsMetadataKey); it != metadata.end()) {
      try {
        num_inputs = std::stoi(it->second);
      } catch (const std::exception&) {
        num_inputs = -1;
      }
    }
    std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
    {
      std::optional<c10::DeviceGuard> guard;
      if (is_cuda) guard.emplace(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index)));
      // Single-threaded: run() holds mutex_, so the container's own model pool is not needed,
      // and its threaded path records an event per run and waits on it before the next one,
      // which breaks CUDA-graph capture of the package (torch documents the flag for that).
      loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          package_path, "model", /*run_single_threaded=*/true, /*num_runners=*/1,
          static_cast<c10::DeviceIndex>(is_cuda ? index : -1));
    }
    std::vector<std::string> call_spec = loader->get_call_spec();
    return std::unique_ptr<AotiRunner>(new AotiRunner(package_path, std::move(loader), is_cuda,
                                                      is_cuda ? index : -1, num_inputs, std::move(call_spec),
                                                      std::move(metadata)));
  } catch (const std::exception& e) {
    return backend_error("Failed to load AOTInductor package '" + package_path + "': " + exception_text(e));
  } catch (...) {
    return backend_error("Failed to load AOTInductor package '" + package_path + "': unknown error");
  }
}

std::string AotiRunner::device() const { return is_cuda_ ? cuda_device_name(device_index_) : "cpu"; }

std::string AotiRunner::describe() const {
  return "AotiRunner(package='" + package_path_ + "', device=" + device() + ")";
}

StatusOr<std::vector<at::Tensor>> AotiRunner::run(const std::vector<at::Tensor>& inputs) {
  if (num_inputs_ >= 0 && inputs.size() != static_cast<size_t>(num_inputs_)) {
    return invalid_argument("AOTInductor package '" + package_path_ + "' takes " +
                            std::to_string(num_inputs_) + " input tensor(s), got " +
                            std::to_string(inputs.size()));
  }
  // Wrong devices or strides would make the generated code read garbage, not fail: check here.
  bool all_contiguous = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (!t.defined())
      return invalid_argument("AOTInductor input " + std::to_string(i) + " is an undefined tensor");
    const c10::Device d = t.device();
    const bool ok = is_cuda_ ? (d.is_cuda() && d.index() == device_index_) : d.is_cpu();
    if (!ok) {
      return invalid_argument("AOTInductor input " + std::to_string(i) + " is on " + d.str() +
                              ", but package '" + package_path_ + "' runs on " + device());
    }
    all_contiguous = all_contiguous && t.is_contiguous();
  }
  try {
    std::vector<at::Tensor> contiguous;
    if (!all_contiguous) {
      contiguous.reserve(inputs.size());
      for (const auto& t : inputs) contiguous.push_back(t.contiguous());
    }
    const std::vector<at::Tensor>& args = all_contiguous ? inputs : contiguous;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!is_cuda_) return loader_->run(args, nullptr);
    const c10::Device device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device_index_));
    c10::DeviceGuard guard(device);
    // Work goes on the caller's current stream (docs/reference/dispatch.md#threads-and-streams).
    void* stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device).native_handle();
    return loader_->run(args, stream);
  } catch (const std::exception& e) {
    return backend_error("AOTInductor run failed for package '" + package_path_ + "': " + exception_text(e));
  } catch (...) {
    return backend_error("AOTInductor run failed for package '" + package_path_ + "': unknown error");
  }
}

}  // namespace aitune
