#include "env/environment.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>
#include <link.h>
#include <torch/headeronly/version.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#ifndef AITUNE_VERSION
#define AITUNE_VERSION "0.0.0"
#endif

namespace aitune {
namespace {

// The CUDA driver API and NVML are loaded with dlopen instead of linked, so the same binary
// runs (and says so) on machines without a driver. Signatures from cuda.h / nvml.h.
using CuInit = int (*)(unsigned int);
using CuDriverGetVersion = int (*)(int*);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);
using CuDeviceTotalMem = int (*)(size_t*, int);
using NvmlInit = int (*)();
using NvmlSystemGetDriverVersion = int (*)(char*, unsigned int);
using NvmlShutdown = int (*)();
constexpr int kCuAttrComputeCapabilityMajor = 75;
constexpr int kCuAttrComputeCapabilityMinor = 76;

std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

template <typename F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

void probe_driver(EnvironmentInfo& info) {
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (cuda == nullptr) {
    const char* err = dlerror();
    info.driver_error = std::string("dlopen(libcuda.so.1) failed: ") + (err ? err : "unknown error");
    return;
  }
  auto cu_init = sym<CuInit>(cuda, "cuInit");
  auto cu_version = sym<CuDriverGetVersion>(cuda, "cuDriverGetVersion");
  auto cu_count = sym<CuDeviceGetCount>(cuda, "cuDeviceGetCount");
  auto cu_get = sym<CuDeviceGet>(cuda, "cuDeviceGet");
  auto cu_name = sym<CuDeviceGetName>(cuda, "cuDeviceGetName");
  auto cu_attr = sym<CuDeviceGetAttribute>(cuda, "cuDeviceGetAttribute");
  auto cu_mem = sym<CuDeviceTotalMem>(cuda, "cuDeviceTotalMem_v2");
  if (!cu_init || !cu_version || !cu_count || !cu_get || !cu_name || !cu_attr || !cu_mem) {
    info.driver_error = "libcuda.so.1 lacks the driver API entry points aitune uses";
    return;
  }
  int rc = cu_init(0);
  if (rc != 0) {
    info.driver_error = "cuInit failed with CUDA error " + std::to_string(rc);
    return;
  }
  int version = 0;
  if (cu_version(&version) == 0) info.driver_cuda_version = cuda_version_text(version);
  int count = 0;
  if (cu_count(&count) != 0) count = 0;
  for (int i = 0; i < count; ++i) {
    int dev = 0;
    if (cu_get(&dev, i) != 0) continue;
    GpuInfo gpu;
    gpu.index = i;
    char name[256] = {0};
    if (cu_name(name, sizeof(name) - 1, dev) == 0) gpu.name = name;
    cu_attr(&gpu.sm_major, kCuAttrComputeCapabilityMajor, dev);
    cu_attr(&gpu.sm_minor, kCuAttrComputeCapabilityMinor, dev);
    size_t mem = 0;
    if (cu_mem(&mem, dev) == 0) gpu.memory_bytes = static_cast<int64_t>(mem);
    info.gpus.push_back(gpu);
  }
  // The kernel driver's own version comes from NVML.
  if (void* nvml = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    auto init = sym<NvmlInit>(nvml, "nvmlInit_v2");
    auto get = sym<NvmlSystemGetDriverVersion>(nvml, "nvmlSystemGetDriverVersion");
    auto shutdown = sym<NvmlShutdown>(nvml, "nvmlShutdown");
    if (init && get && init() == 0) {
      char text[96] = {0};
      if (get(text, sizeof(text)) == 0) info.driver_version = text;
      if (shutdown) shutdown();
    }
  }
}

// The file behind a dlopen handle (where the loader found the library).
std::string loaded_path(void* lib) {
  struct link_map* map = nullptr;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) return map->l_name;
  return "";
}

// Tries the given sonames in order; `version_fn(lib)` reads the version once loaded.
template <typename Names, typename VersionFn>
LibraryProbe probe_library(const char* name, const Names& sonames, VersionFn version_fn) {
  LibraryProbe probe;
  probe.name = name;
  std::string errors;
  for (const auto& soname_text : sonames) {
    const std::string soname(soname_text);
    void* lib = dlopen(soname.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (lib != nullptr) {
      probe.found = true;
      probe.version = version_fn(lib);
      probe.path = loaded_path(lib);
      probe.how = "dlopen(" + soname + ") succeeded" + (probe.path.empty() ? "" : ": " + probe.path);
      return probe;
    }
    if (!errors.empty()) errors += "; ";
    errors += "dlopen(" + soname + ") failed";
  }
  probe.how = errors +
              " (the Python wheels keep their libraries off the loader path: `python -m aitune doctor` "
              "also checks the Python packages)";
  return probe;
}

std::string tensorrt_version(void* lib) {
  using GetVersion = int (*)();
  auto get = sym<GetVersion>(lib, "getInferLibVersion");
  return get ? decode_tensorrt_version(get()) : "";
}

std::string onnxruntime_version(void* lib) {
  struct OrtApiBase {
    const void* (*GetApi)(uint32_t);
    const char* (*GetVersionString)();
  };
  using GetApiBase = const OrtApiBase* (*)();
  auto get = sym<GetApiBase>(lib, "OrtGetApiBase");
  if (!get) return "";
  const OrtApiBase* base = get();
  return base && base->GetVersionString ? base->GetVersionString() : "";
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string q(std::string_view s) { return "\"" + json_escape(s) + "\""; }

}  // namespace

const std::vector<std::string>& tensorrt_sonames() {
  static const std::vector<std::string> names = {"libnvinfer.so.11", "libnvinfer.so.10", "libnvinfer.so"};
  return names;
}

std::string decode_tensorrt_version(int v) {
  auto text = [](int major, int minor, int patch) {
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  };
  if (v >= 100000) return text(v / 10000, (v / 100) % 100, v % 100);  // TensorRT 10 and later
  if (v >= 8000) return text(v / 1000, (v / 100) % 10, v % 100);      // TensorRT 8 and 9
  return "";
}

std::vector<std::string> site_packages_dirs() {
  namespace fs = std::filesystem;
  std::vector<std::string> dirs;
  auto add = [&dirs](const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return;
    const std::string text = fs::weakly_canonical(dir, ec).string();
    for (const auto& d : dirs)
      if (d == text) return;
    dirs.push_back(text);
  };
  Dl_info where{};
  // A symbol of libtorch: <site-packages>/torch/lib/libtorch_cpu.so for a pip-installed torch.
  if (dladdr(reinterpret_cast<void*>(&at::hasCUDA), &where) != 0 && where.dli_fname != nullptr) {
    add(fs::path(where.dli_fname).parent_path().parent_path().parent_path());
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {  // <prefix>/bin/aitune -> <prefix>/lib/python3.*/site-packages
    for (const auto& entry : fs::directory_iterator(exe.parent_path().parent_path() / "lib", ec)) {
      if (entry.path().filename().string().rfind("python3", 0) == 0) add(entry.path() / "site-packages");
    }
  }
  return dirs;
}

LibraryProbe probe_python_package(const std::string& label, const std::string& module,
                                  const std::string& dist, const std::vector<std::string>& site_dirs) {
  namespace fs = std::filesystem;
  LibraryProbe probe;
  probe.name = label;
  std::string searched;
  for (const auto& dir : site_dirs) {
    std::error_code ec;
    const fs::path package = fs::path(dir) / module;
    if (!fs::is_regular_file(package / "__init__.py", ec)) {
      searched += (searched.empty() ? "" : ", ") + dir;
      continue;
    }
    probe.found = true;
    probe.path = package.string();
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(dist + "-", 0) != 0 || entry.path().extension() != ".dist-info") continue;
      std::ifstream metadata(entry.path() / "METADATA");
      for (std::string line; std::getline(metadata, line);) {
        if (line.rfind("Version: ", 0) == 0) {
          probe.version = line.substr(9);
          break;
        }
      }
      if (!probe.version.empty()) break;
    }
    probe.how = "Python package in " + dir + "; its backend runs from Python only";
    return probe;
  }
  probe.how =
      "no " + module + "/__init__.py in " + (searched.empty() ? std::string("any site-packages") : searched);
  return probe;
}

LibraryProbe probe_tensorrt(const std::vector<std::string>& sonames) {
  return probe_library("TensorRT", sonames, tensorrt_version);
}

EnvironmentInfo probe_environment() {
  EnvironmentInfo info;
  info.aitune_version = AITUNE_VERSION;
  info.torch_version = TORCH_VERSION;
  const auto& hooks = at::detail::getCUDAHooks();
  info.torch_has_cuda = at::hasCUDA();
  if (hooks.hasCUDART()) {
    const long v = hooks.versionCUDART();
    if (v > 0) info.torch_cuda_runtime = cuda_version_text(static_cast<int>(v));
  }
  probe_driver(info);
  info.libraries.push_back(probe_tensorrt(tensorrt_sonames()));
  const std::vector<std::string> torch_tensorrt = {"libtorchtrt.so", "libtorchtrt_runtime.so"};
  info.libraries.push_back(
      probe_library("Torch-TensorRT", torch_tensorrt, [](void*) { return std::string(); }));
  const std::vector<std::string> onnxruntime = {"libonnxruntime.so.1", "libonnxruntime.so"};
  info.libraries.push_back(probe_library("ONNX Runtime", onnxruntime, onnxruntime_version));
  info.python_packages.push_back(probe_python_package("TorchAO", "torchao", "torchao", site_packages_dirs()));
  const char* kill = std::getenv("AITUNE_DISABLE_CUDA_GRAPHS");
  std::string_view k = kill ? kill : "";
  info.cuda_graphs_disabled =
      k == "1" || k == "true" || k == "True" || k == "yes" || k == "Yes" || k == "YES";
  return info;
}

// Text is assembled with std::string rather than iostreams: inside a Python process another
// libstdc++'s locale facets may already be loaded (seen on the GPU machine: ostream's integer
// insertion crashed there while the same code ran fine in the CLI).
std::string to_json(const EnvironmentInfo& info) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  std::string o = "{\"aitune_version\": " + q(info.aitune_version) +
                  ", \"torch_version\": " + q(info.torch_version) +
                  ", \"torch_has_cuda\": " + b(info.torch_has_cuda) +
                  ", \"torch_cuda_runtime\": " + q(info.torch_cuda_runtime) +
                  ", \"driver_version\": " + q(info.driver_version) +
                  ", \"driver_cuda_version\": " + q(info.driver_cuda_version) +
                  ", \"driver_error\": " + q(info.driver_error) +
                  ", \"cuda_graphs_disabled\": " + b(info.cuda_graphs_disabled) + ", \"gpus\": [";
  for (size_t i = 0; i < info.gpus.size(); ++i) {
    const auto& g = info.gpus[i];
    o += std::string(i ? ", " : "") + "{\"index\": " + std::to_string(g.index) + ", \"name\": " + q(g.name) +
         ", \"sm\": \"" + std::to_string(g.sm_major) + "." + std::to_string(g.sm_minor) +
         "\", \"memory_bytes\": " + std::to_string(g.memory_bytes) + "}";
  }
  o += "], \"libraries\": [";
  for (size_t i = 0; i < info.libraries.size(); ++i) {
    const auto& l = info.libraries[i];
    o += std::string(i ? ", " : "") + "{\"name\": " + q(l.name) + ", \"found\": " + b(l.found) +
         ", \"version\": " + q(l.version) + ", \"path\": " + q(l.path) + ", \"how\": " + q(l.how) + "}";
  }
  o += "], \"python_packages\": [";
  for (size_t i = 0; i < info.python_packages.size(); ++i) {
    const auto& p = info.python_packages[i];
    o += std::string(i ? ", " : "") + "{\"name\": " + q(p.name) + ", \"found\": " + b(p.found) +
         ", \"version\": " + q(p.version) + ", \"path\": " + q(p.path) + ", \"how\": " + q(p.how) + "}";
  }
  return o + "]}";
}

std::string to_text(const EnvironmentInfo& info) {
  std::string o = "aitune " + info.aitune_version + "\n";
  o += "libtorch: " + info.torch_version + " (CUDA " +
       (info.torch_cuda_runtime.empty() ? std::string("not built") : info.torch_cuda_runtime) + ")\n";
  o += std::string("CUDA available to torch: ") + (info.torch_has_cuda ? "yes" : "no") + "\n";
  if (info.driver_error.empty()) {
    o += "NVIDIA driver: " + (info.driver_version.empty() ? std::string("unknown") : info.driver_version) +
         " (supports CUDA " + info.driver_cuda_version + ")\n";
  } else {
    o += "NVIDIA driver: none (" + info.driver_error + ")\n";
  }
  if (info.gpus.empty()) o += "GPUs: none\n";
  for (const auto& g : info.gpus) {
    o += "GPU " + std::to_string(g.index) + ": " + g.name + ", SM " + std::to_string(g.sm_major) + "." +
         std::to_string(g.sm_minor) + ", " + std::to_string(g.memory_bytes >> 20) + " MiB\n";
  }
  for (const auto& l : info.libraries) {
    o += l.name + ": " + (l.found ? "usable" : "not found") + (l.version.empty() ? "" : " " + l.version) +
         " (" + l.how + ")\n";
  }
  for (const auto& p : info.python_packages) {
    o += p.name + ": " + (p.found ? "installed" : "not found") + (p.version.empty() ? "" : " " + p.version) +
         " (" + p.how + ")\n";
  }
  o += std::string("CUDA graphs: ") +
       (info.cuda_graphs_disabled ? "disabled by AITUNE_DISABLE_CUDA_GRAPHS" : "enabled") + "\n";
  return o;
}

}  // namespace aitune
