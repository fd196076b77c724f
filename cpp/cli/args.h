// The `aitune` command line's shared pieces (docs/reference/native.md#command-line): exit codes, option
// parsing, the Status -> exit code mapping, and the steps inspect/run/bench share (device
// checks, loading, picking a module and graph, reading an inputs file).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/runtime.h"

namespace aitune::cli {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCorrupt = 3;
constexpr int kExitIncompatible = 4;
constexpr int kExitNotNative = 5;
constexpr int kExitNumeric = 6;
constexpr int kExitInput = 7;

// Parsed options of inspect/run/bench.
struct Args {
  std::string ckpt;
  std::map<std::string, std::string> values;              // --flag value (the last one given)
  std::map<std::string, std::vector<std::string>> lists;  // repeated --flag value, in order
  std::map<std::string, bool> flags;                      // --flag
};

// `value_flags` take one argument; `bool_flags` none; `list_flags` one argument, and may repeat.
// Prints the usage error and returns nullopt on a bad command line.
std::optional<Args> parse(const std::string& command, int argc, char** argv,
                          const std::vector<std::string>& value_flags,
                          const std::vector<std::string>& bool_flags,
                          const std::vector<std::string>& list_flags = {});
// A decimal int; nullopt for anything else, including values outside int.
std::optional<int> parse_int(const std::string& s);
constexpr int kMaxCudaIndex = 127;
// --device N|cuda:N|cpu -> device index (-1: CPU). Default 0. nullopt for a negative index or one
// above kMaxCudaIndex.
std::optional<int> parse_device(const Args& a);
// An explicit --device cuda:N must exist on this machine (kIncompatible) and suit the graph's
// package (a CPU package cannot run on a GPU: kInvalidArgument). Without --device: ok.
Status check_device(const Args& a, int device, const GraphInfo& graph);
// --cuda-graphs on|off|auto into `graphs` (auto, the default: as saved with the backend, nullopt).
// False for any other value.
bool parse_cuda_graphs(const Args& a, std::optional<bool>& graphs);

// The exit code of a Status (docs/reference/native.md#command-line).
int exit_code(const Status& s);
// Prints "aitune <command>: <code>: <message>" and returns its exit code.
int fail(const std::string& command, const Status& s);
// Prints "aitune <command>: <message>" and returns kExitUsage.
int usage_error(const std::string& command, const std::string& message);

StatusOr<std::unique_ptr<Runtime>> load_for_run(const Args& a, int device, std::optional<bool> graphs);
// Resolves --module (default: the first module) and --graph (default: the first graph).
Status pick(const Runtime& rt, const Args& a, const ModuleHandle** module, const GraphInfo** graph);
// The tensors of a safetensors file as `Inputs`, keyed by their names (a missing file is
// kInvalidArgument: a usage error).
StatusOr<Inputs> read_inputs_file(const std::string& path);

}  // namespace aitune::cli
