#include "measure/call_timer.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <string>

// CUDA parts compile when torch ships them and the toolkit headers are on the path (a CUDA
// build of torch); otherwise CUDA timing reports that CUDA is unavailable.
#if !defined(AITUNE_NO_CUDA) && __has_include(<c10/cuda/CUDAEvent.h>) && __has_include(<cuda_runtime_api.h>)
#define AITUNE_TIMER_HAS_CUDA 1
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#else
#define AITUNE_TIMER_HAS_CUDA 0
#endif

namespace aitune {
namespace {

double now_ns() {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
}

Status cuda_failure(const std::string& what) { return Status(StatusCode::kCudaError, "time_call: " + what); }

// The timed callable should report failures through its Status; an exception escaping it is
// the call's failure too, not a timer failure, and never crosses this library's boundary.
Status invoke(const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    return Status(StatusCode::kBackendError,
                  std::string("the timed call failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status(StatusCode::kBackendError, std::string("the timed call failed: ") + e.what());
  }
}

#if AITUNE_TIMER_HAS_CUDA
StatusOr<TimedCall> time_on_cuda(const std::function<Status()>& fn, int device) {
  const int count = static_cast<int>(c10::cuda::device_count());
  if (count == 0) {
    return Status(StatusCode::kBackendUnavailable, "time_call: CUDA timing requested for device " +
                                                       std::to_string(device) +
                                                       " but no CUDA device is available");
  }
  if (device < 0 || device >= count) {
    return Status(StatusCode::kBackendUnavailable, "time_call: CUDA device index out of range; expected 0.." +
                                                       std::to_string(count - 1) + ", got " +
                                                       std::to_string(device));
  }
  const auto index = static_cast<c10::DeviceIndex>(device);
  c10::cuda::CUDAGuard device_guard(index);
  // Timing enabled (the default flags disable it). Events are RAII and move-only.
  c10::cuda::CUDAEvent start(cudaEventDefault);
  c10::cuda::CUDAEvent end(cudaEventDefault);

  c10::cuda::device_synchronize();
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(index);
  const double t0 = now_ns();
  start.record(stream);
  Status status = invoke(fn);
  if (!status.ok()) return status;
  // fn may have changed the current stream only inside its own guard; the event brackets the
  // stream that was current when the call began, and the device sync covers every stream.
  end.record(stream);
  c10::cuda::device_synchronize();
  const double t1 = now_ns();
  return TimedCall{t1 - t0, static_cast<double>(start.elapsed_time(end))};
}
#endif

}  // namespace

StatusOr<TimedCall> time_call(const std::function<Status()>& fn, std::optional<int> cuda_device) {
  AITUNE_CHECK_ARG(static_cast<bool>(fn), "time_call: no callable to time");
  try {
    at::NoGradGuard no_grad;
    if (cuda_device.has_value()) {
#if AITUNE_TIMER_HAS_CUDA
      return time_on_cuda(fn, *cuda_device);
#else
      return Status(StatusCode::kBackendUnavailable,
                    "time_call: CUDA timing requested but this build of aitune has no CUDA support");
#endif
    }
    const double t0 = now_ns();
    Status status = invoke(fn);
    const double t1 = now_ns();
    if (!status.ok()) return status;
    return TimedCall{t1 - t0, std::nullopt};
  } catch (const c10::Error& e) {
    return cuda_failure(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return cuda_failure(e.what());
  }
}

}  // namespace aitune
