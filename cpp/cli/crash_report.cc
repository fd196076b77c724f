#include "crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

namespace aitune::cli {
namespace {

// Only async-signal-safe calls here: write(2), backtrace_symbols_fd (glibc writes straight to
// the fd without malloc), signal/raise. backtrace() itself may load libgcc on first use, so it
// is called once at install time to have that done before any crash.
void write_text(const char* text) {
  const ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void on_fatal_signal(int sig) {
  write_text("\naitune: fatal signal ");
  write_text(strsignal(sig));
  write_text("; backtrace (library(symbol+offset) [address]):\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  write_text("aitune: please report this with the backtrace and `aitune doctor` output\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void install_crash_report() {
  void* warmup[1];
  backtrace(warmup, 1);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) signal(sig, on_fatal_signal);
}

}  // namespace aitune::cli
