// A fatal signal in the CLI (a crash inside a model library, a driver fault) prints where it
// happened before the process dies, so a user's bug report carries a backtrace instead of a bare
// "Segmentation fault".
#pragma once

namespace aitune::cli {

// Installs handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT that write the signal and a
// backtrace (library + offset per frame) to stderr, then re-raise it with the default action, so
// the exit status and any core dump stay what they would have been.
void install_crash_report();

}  // namespace aitune::cli
