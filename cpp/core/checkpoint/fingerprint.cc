#include "checkpoint/fingerprint.h"

#include <sys/utsname.h>

#include <cctype>

namespace aitune {
namespace {

std::optional<std::string> lookup(const Fingerprint& fp, std::string_view field) {
  const auto it = fp.find(field);
  return it == fp.end() ? std::nullopt : it->second;
}

std::optional<std::string> major_of(const std::optional<std::string>& version) {
  if (!version || version->empty()) return std::nullopt;
  return version->substr(0, version->find('.'));
}

std::optional<std::string> without_local(const std::optional<std::string>& version) {
  if (!version) return std::nullopt;
  return version->substr(0, version->find('+'));
}

// "8.6" -> true; anything that does not start with a major >= 8 -> false.
bool ampere_plus(const std::optional<std::string>& sm) {
  if (!sm || sm->empty()) return false;
  const std::string major = sm->substr(0, sm->find('.'));
  if (major.empty() || major.size() > 6) return false;
  for (const char c : major) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return std::stoi(major) >= 8;
}

}  // namespace

std::vector<FingerprintMismatch> fingerprint_mismatches(const Fingerprint& saved, const Fingerprint& current,
                                                        const std::vector<std::string>& requires_) {
  std::vector<FingerprintMismatch> out;
  for (const std::string& field : requires_) {
    if (field == "cuda_major") {
      const auto a = major_of(lookup(saved, "cuda_runtime"));
      const auto b = major_of(lookup(current, "cuda_runtime"));
      if (a != b) out.push_back({field, a, b});
    } else if (field == "gpu_sm_ampere_plus") {
      const auto a = lookup(saved, "gpu_sm");
      const auto b = lookup(current, "gpu_sm");
      if (ampere_plus(a) && ampere_plus(b)) continue;
      if (a != b) out.push_back({"gpu_sm", a, b});
    } else if (field == "torch") {
      const auto a = lookup(saved, field);
      const auto b = lookup(current, field);
      if (without_local(a) != without_local(b)) out.push_back({field, a, b});
    } else {
      const auto a = lookup(saved, field);
      const auto b = lookup(current, field);
      if (a != b) out.push_back({field, a, b});
    }
  }
  return out;
}

FingerprintFields build_fingerprint(const FingerprintSources& s) {
  auto text = [](const std::string& v) { return v.empty() ? std::nullopt : std::optional<std::string>(v); };
  FingerprintFields out = {{"gpu_name", text(s.gpu_name)},
                           {"gpu_sm", text(s.gpu_sm)},
                           {"driver_version", text(s.driver_version)},
                           {"cuda_runtime", text(s.cuda_runtime)},
                           {"torch", text(s.torch)}};
  if (s.has_packages) {
    out.emplace_back("tensorrt", text(s.tensorrt));
    out.emplace_back("torch_tensorrt", text(s.torch_tensorrt));
    out.emplace_back("onnxruntime", text(s.onnxruntime));
  }
  out.emplace_back("platform", text(s.platform));
  return out;
}

std::string host_platform() {
  struct utsname u {};
  if (uname(&u) != 0) return "";
  std::string system = u.sysname;
  for (char& c : system) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return system + "-" + u.machine;
}

std::string fingerprint_value_text(const std::optional<std::string>& value) {
  return value ? *value : "None";
}

}  // namespace aitune
