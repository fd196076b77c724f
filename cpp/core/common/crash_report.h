// A fatal signal (a crash inside a model library, a driver fault) prints where it happened
// before the process dies, so a bug report carries native frames instead of a bare
// "Segmentation fault". The CLI installs it always; the Python extension when
// AITUNE_CRASH_REPORT=1 (python/aitune/_native.py).
#pragma once

namespace aitune {

// Installs handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT that write to stderr: the
// signal, the faulting address and instruction, the code addresses found near the top of the
// stack (a call through a bad pointer leaves no unwindable frame, but its return address is
// there), and a backtrace. Then the previous handler (Python's faulthandler, for one) or the
// default action runs, so the exit status and any core dump stay what they would have been.
// Idempotent.
void install_crash_report();

}  // namespace aitune
