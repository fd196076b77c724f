// The `aitune` command line (docs/reference/native.md#command-line): doctor, inspect, run and bench over
// checkpoints. Exit codes: 0 ok; 1 runtime/backend error; 2 usage; 3 corrupt or unsupported checkpoint;
// 4 incompatible environment; 5 graph not runnable natively; 6 numeric check failed;
// 7 input outside profile or unknown graph.
#include <c10/util/Exception.h>

#include <exception>
#include <iostream>
#include <string>

#include "cli.h"
#include "common/crash_report.h"

namespace {

using namespace aitune::cli;

int usage(std::ostream& out, int code) {
  out << "usage: aitune <command> [options]\n"
         "\n"
         "commands:\n"
         "  doctor [--json]   show the torch build, CUDA driver, GPUs and optional libraries aitune can use\n"
         "  inspect <ckpt> [--json] [--verify fast|full]\n"
         "                    modules, graphs, specs, backends, files, fingerprint and per-graph verdicts\n"
         "  run <ckpt> [--module M] [--graph G] [--inputs FILE.safetensors] [--outputs FILE.safetensors]\n"
         "             [--check] [--device N|cpu] [--cuda-graphs on|off|auto]\n"
         "                    one run (default inputs: the graph's stored sample 0)\n"
         "  bench <ckpt> [--module M] [--graph G] [--batch-size N | --shape PATH=D0xD1... ...]\n"
         "               [--inputs FILE.safetensors | --random] [--warmup 10] [--iterations 20]\n"
         "               [--stable-cv R [--max-iterations 100]] [--device N|cpu]\n"
         "               [--cuda-graphs on|off|auto] [--json]\n"
         "                    latency and throughput on the graph's stored sample 0, resized per axis\n"
         "                    (repeated or sliced) to --batch-size on the batch axes, or to each --shape\n"
         "                    (PATH: the input's name input_x, semantic form x or access form);\n"
         "                    --inputs: a file's tensors, keyed as for run --inputs; --random: seeded\n"
         "                    random inputs of the stored sample's shapes (the profile minimum without\n"
         "                    one; --shape and --batch-size apply) and the graph's dtypes: floats randn,\n"
         "                    bool and *mask* integer inputs in [0, 2), other integers in [0, 100);\n"
         "                    --stable-cv R: measure until the CV of the last --iterations calls is <= R\n"
         "                    (0 < R < 1), failing after --max-iterations measured calls\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(std::cerr, kExitUsage);
  aitune::install_crash_report();
  const std::string command = argv[1];
  try {
    if (command == "-h" || command == "--help" || command == "help") return usage(std::cout, kExitOk);
    if (command == "doctor") return doctor(argc - 2, argv + 2);
    if (command == "inspect") return inspect(argc - 2, argv + 2);
    if (command == "run") return run(argc - 2, argv + 2);
    if (command == "bench") return bench(argc - 2, argv + 2);
  } catch (const c10::Error& e) {
    // torch's message without its backtrace: the frames say nothing to a user of the CLI.
    std::cerr << "aitune " << command << ": internal error: " << e.what_without_backtrace() << "\n";
    return kExitError;
  } catch (const std::exception& e) {
    std::cerr << "aitune " << command << ": internal error: " << e.what() << "\n";
    return kExitError;
  }
  std::cerr << "aitune: unknown command '" << command << "'\n";
  return usage(std::cerr, kExitUsage);
}
