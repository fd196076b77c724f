#include "common/crash_report.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace aitune {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
struct sigaction previous[sizeof(kSignals) / sizeof(kSignals[0])];
std::atomic<bool> installed{false};

// Mostly async-signal-safe calls: write(2), backtrace_symbols_fd (writes straight to the fd),
// snprintf into a stack buffer. dladdr is not on the list but only reads the loader's tables; the
// process is dying anyway. backtrace() may load libgcc on first use, so install() calls it once.
void write_text(const char* text) {
  const ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

// "0x... lib.so(symbol+0xoff)" where the address is inside a loaded object; false otherwise.
bool describe_code_address(const char* label, uintptr_t address) {
  Dl_info info{};
  if (address == 0 || dladdr(reinterpret_cast<void*>(address), &info) == 0 || info.dli_fname == nullptr)
    return false;
  char line[768];
  const uintptr_t base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  if (info.dli_sname != nullptr) {
    std::snprintf(line, sizeof(line), "  %s 0x%zx %s(%s+0x%zx)\n", label, static_cast<size_t>(address),
                  info.dli_fname, info.dli_sname,
                  static_cast<size_t>(address - reinterpret_cast<uintptr_t>(info.dli_saddr)));
  } else {
    std::snprintf(line, sizeof(line), "  %s 0x%zx %s(+0x%zx)\n", label, static_cast<size_t>(address),
                  info.dli_fname, static_cast<size_t>(address - base));
  }
  write_text(line);
  return true;
}

void report_context(int sig, const siginfo_t* info, const void* context) {
  char line[256];
  std::snprintf(line, sizeof(line), "\naitune: fatal signal %d (%s), fault address %p\n", sig, strsignal(sig),
                info != nullptr ? info->si_addr : nullptr);
  write_text(line);
#if defined(__x86_64__) && defined(__linux__)
  if (context == nullptr) return;
  const auto* uc = static_cast<const ucontext_t*>(context);
  const auto pc = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  const auto sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  if (!describe_code_address("instruction", pc)) {
    std::snprintf(line, sizeof(line),
                  "  instruction 0x%zx (outside any loaded object: a call through a bad pointer?)\n",
                  static_cast<size_t>(pc));
    write_text(line);
  }
  // Return addresses on the faulting stack: the callers, even where unwinding stops.
  write_text("  code addresses near the top of the stack (nearest first):\n");
  const auto* words = reinterpret_cast<const uintptr_t*>(sp);
  int found = 0;
  for (int i = 0; i < 256 && found < 24; ++i) {
    if (describe_code_address("   ", words[i])) ++found;
  }
#else
  (void)context;
#endif
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  report_context(sig, info, context);
  write_text("aitune: backtrace (library(symbol+offset) [address]):\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  write_text("aitune: please report this with the output above and `aitune doctor`\n");
  // Hand over to whoever handled the signal before us, else the default action.
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    if (kSignals[i] == sig) sigaction(sig, &previous[i], nullptr);
  }
  struct sigaction current {};
  sigaction(sig, nullptr, &current);
  if (!(current.sa_flags & SA_SIGINFO) && (current.sa_handler == SIG_IGN)) signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void install_crash_report() {
  if (installed.exchange(true)) return;
  void* warmup[1];
  backtrace(warmup, 1);
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO;  // the signal stays blocked inside: a fault there kills at once
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i)
    sigaction(kSignals[i], &action, &previous[i]);
}

}  // namespace aitune
