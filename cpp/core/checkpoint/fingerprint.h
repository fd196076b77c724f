// The environment fingerprint's one comparison rule
// (docs/reference/checkpoint.md#integrity-and-compatibility), used by the C++ runtime and, through
// `_C.fingerprint_mismatches`, by Python's ait.load, so the two cannot drift. Torch-free: a fingerprint is a
// flat map of text values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aitune {

// Field -> value ("torch" -> "2.11.0+cu130", "gpu_sm" -> "9.0"); nullopt for a component that is
// absent (JSON null). A manifest's numbers are kept as their JSON text.
using Fingerprint = std::map<std::string, std::optional<std::string>, std::less<>>;

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
