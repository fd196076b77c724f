// `aitune doctor [--json]` (docs/reference/native.md#command-line): the torch build, CUDA driver, GPUs and
// the optional native libraries this machine offers.
#include <cstring>
#include <iostream>

#include "cli.h"
#include "env/environment.h"

namespace aitune::cli {

int doctor(int argc, char** argv) {
  bool json_out = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json_out = true;
    } else {
      std::cerr << "aitune doctor: unknown option '" << argv[i] << "'; expected --json\n";
      return kExitUsage;
    }
  }
  const aitune::EnvironmentInfo info = aitune::probe_environment();
  std::cout << (json_out ? aitune::to_json(info) + "\n" : aitune::to_text(info));
  return kExitOk;
}

}  // namespace aitune::cli
