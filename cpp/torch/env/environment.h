// What this machine offers aitune: torch build, CUDA driver and GPUs, whether the optional
// native libraries (TensorRT, Torch-TensorRT, ONNX Runtime) can be loaded, and the optional Python
// packages whose backends run from Python only (TorchAO). Used by
// `aitune doctor` and, later, by the checkpoint fingerprint
// (docs/reference/checkpoint.md#integrity-and-compatibility).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aitune {

struct GpuInfo {
  int index = 0;
  std::string name;
  int sm_major = 0;
  int sm_minor = 0;
  int64_t memory_bytes = 0;
};

// Result of trying to load an optional library: found or not, its version when it reports
// one, and how we know (the exact dlopen name, or the error).
struct LibraryProbe {
  std::string name;
  bool found = false;
  std::string version;
  std::string how;
  std::string path;  // the file the loader opened, when found
};

struct EnvironmentInfo {
  std::string aitune_version;
  std::string torch_version;        // libtorch this binary was built against
  bool torch_has_cuda = false;      // libtorch built with CUDA and a CUDA device is usable
  std::string torch_cuda_runtime;   // CUDA runtime libtorch uses, "13.0"; empty without CUDA
  std::string driver_version;       // NVIDIA kernel driver, "570.124.06"; empty if none
  std::string driver_cuda_version;  // newest CUDA the driver supports, "13.0"
  std::string driver_error;         // why the driver could not be queried
  std::vector<GpuInfo> gpus;
  std::vector<LibraryProbe> libraries;
  std::vector<LibraryProbe> python_packages;  // found in the Python environment(s) this binary belongs to
  bool cuda_graphs_disabled = false;          // AITUNE_DISABLE_CUDA_GRAPHS
};

EnvironmentInfo probe_environment();

// The sonames tried for TensorRT, newest major first: TensorRT 11 ships libnvinfer.so.11,
// TensorRT 10 libnvinfer.so.10 (docs/guide.md, Checking the machine).
const std::vector<std::string>& tensorrt_sonames();

// getInferLibVersion() as "major.minor.patch": TensorRT 10 and 11 encode
// major * 10000 + minor * 100 + patch (110400 is 11.4.0), TensorRT 8 and 9 major * 1000 +
// minor * 100 + patch (8601 is 8.6.1). Empty for a value neither encoding explains.
std::string decode_tensorrt_version(int encoded);

// Loads TensorRT by the first of `sonames` (names or paths) that dlopen accepts.
LibraryProbe probe_tensorrt(const std::vector<std::string>& sonames);

// The site-packages folders this binary belongs to: the one holding the libtorch it runs on
// (<site-packages>/torch/lib) and the one of the environment whose bin/ holds the executable.
std::vector<std::string> site_packages_dirs();

// Looks for the Python package `module` (a folder with __init__.py) in `site_dirs`, in order; its
// version is the `Version:` of the first `<dist>-*.dist-info/METADATA` beside it. `label` names it.
LibraryProbe probe_python_package(const std::string& label, const std::string& module,
                                  const std::string& dist, const std::vector<std::string>& site_dirs);

std::string to_json(const EnvironmentInfo& info);
std::string to_text(const EnvironmentInfo& info);

}  // namespace aitune
