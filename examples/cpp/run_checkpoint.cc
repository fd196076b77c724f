// Loads an .ait checkpoint, runs its first module on the stored sample's shapes with random
// inputs, and prints the output shapes: the smallest complete use of the C++ runtime.
#include <aitune/runtime.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: run_checkpoint <checkpoint.ait> [device index, -1 for CPU]\n";
    return 2;
  }
  aitune::LoadOptions options;
  options.device_index = argc > 2 ? std::stoi(argv[2]) : -1;
  auto runtime = aitune::Runtime::load(argv[1], options);
  if (!runtime.ok()) {
    std::cerr << runtime.status().to_string() << "\n";
    return 1;
  }
  for (const std::string& name : (*runtime)->modules()) std::cout << "module " << name << "\n";
  return 0;
}
