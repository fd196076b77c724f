// The `aitune` commands (docs/reference/native.md#command-line), one file each under commands/; main.cc
// dispatches to them. Each takes the arguments after its name and returns the process exit code.
#pragma once

#include "args.h"

namespace aitune::cli {

int doctor(int argc, char** argv);   // commands/doctor.cc
int inspect(int argc, char** argv);  // commands/inspect.cc
int run(int argc, char** argv);      // commands/run.cc
int bench(int argc, char** argv);    // commands/bench.cc

}  // namespace aitune::cli
