// The `aitune` command line (SPEC §11.2). This release: `doctor`. Later issues add inspect,
// bench and run over checkpoints.
#include <cstring>
#include <iostream>
#include <string>

#include "env/environment.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;

int usage(std::ostream& out, int code) {
  out << "usage: aitune <command> [options]\n"
         "\n"
         "commands:\n"
         "  doctor [--json]   show the torch build, CUDA driver, GPUs and optional libraries aitune can use\n";
  return code;
}

int doctor(int argc, char** argv) {
  bool json = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else {
      std::cerr << "aitune doctor: unknown option '" << argv[i] << "'; expected --json\n";
      return kExitUsage;
    }
  }
  const aitune::EnvironmentInfo info = aitune::probe_environment();
  std::cout << (json ? aitune::to_json(info) + "\n" : aitune::to_text(info));
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(std::cerr, kExitUsage);
  const std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") return usage(std::cout, kExitOk);
  if (command == "doctor") return doctor(argc - 2, argv + 2);
  std::cerr << "aitune: unknown command '" << command << "'\n";
  return usage(std::cerr, kExitUsage);
}
