// The environment fingerprint (docs/reference/checkpoint.md#integrity-and-compatibility): its one
// builder and its one comparison rule, used by the C++ runtime and, through `_C.current_fingerprint`
// and `_C.fingerprint_mismatches`, by Python's ait.save/ait.load, so the two cannot drift.
// Torch-free: a fingerprint is a flat map of text values; the caller probes the environment.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aitune {

// Field -> value ("torch" -> "2.11.0+cu130", "gpu_sm" -> "9.0"); nullopt for a component that is
// absent (JSON null). A manifest's numbers are kept as their JSON text.
using Fingerprint = std::map<std::string, std::optional<std::string>, std::less<>>;

// What a fingerprint is built from; empty text is an absent component (JSON null).
struct FingerprintSources {
  std::string torch;           // torch's version: Python's torch.__version__ ("2.11.0+cu130") or libtorch's
  std::string cuda_runtime;    // the CUDA runtime torch uses ("13.0")
  std::string driver_version;  // the NVIDIA driver's
  std::string gpu_name;        // the GPU the checkpoint is for
  std::string gpu_sm;          // its compute capability ("9.0")
  std::string platform;        // host_platform()
  // Versions of Python packages: only a Python process knows them. Without them (the C++ runtime,
  // the CLI) the fingerprint has no such fields, which compare as absent.
  bool has_packages = false;
  std::string tensorrt;  // the tensorrt module's version (aitune.tensorrt_install)
  std::string torch_tensorrt;
  std::string onnxruntime;
};

// The fingerprint's fields in the order they are saved.
using FingerprintFields = std::vector<std::pair<std::string, std::optional<std::string>>>;

FingerprintFields build_fingerprint(const FingerprintSources& sources);

// "<system>-<machine>" of this host in lower case, as Python's platform module spells them
// ("linux-x86_64", "linux-aarch64").
std::string host_platform();

struct FingerprintMismatch {
  std::string field;                 // the component reported: "gpu_sm" also for gpu_sm_ampere_plus
  std::optional<std::string> saved;  // as compared: the CUDA major for cuda_major
  std::optional<std::string> current;
};

// The required fields (a backend's "requires") in which `saved` and `current` differ, in the
// order of `requires`:
// - "cuda_major": the major of "cuda_runtime" ("13.0" -> "13").
// - "gpu_sm_ampere_plus": "gpu_sm", except that any SM >= 8 on both sides passes (a TensorRT plan
//   built for the AMPERE_PLUS hardware-compatibility level).
// - "torch": the version without its local suffix ("2.11.0+cu130" equals "2.11.0": libtorch
//   reports none); the values reported keep it.
// - any other field: the values compared exactly (absent equals absent).
std::vector<FingerprintMismatch> fingerprint_mismatches(const Fingerprint& saved, const Fingerprint& current,
                                                        const std::vector<std::string>& requires_);

// "None" for an absent value, else the value (Python's rendering of a mismatch triple).
std::string fingerprint_value_text(const std::optional<std::string>& value);

}  // namespace aitune
