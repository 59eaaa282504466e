#include "stop_signals.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

namespace attn::examples {

std::atomic<int>& stop_signal() {
  static std::atomic<int> signal{0};
  return signal;
}

namespace {

// Set before the handlers are, read only after; a plain array, which outlives every thread.
char notice_text[512];
std::size_t notice_length = 0;

// Whether a first signal has been taken: set by whichever thread takes one first (the signal
// thread, or a handler on a thread started before take_stop_signals).
std::atomic<bool> first_taken{false};

// Takes a stop signal on a thread where SIGINT and SIGTERM are blocked (the signal thread), or
// in a handler, where the signal taken is. Async-signal-safe: sigaction, sigprocmask, write.
void take(int signal, bool in_handler) {
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  if (first_taken.exchange(true)) {  // a second signal, taken before the first was done with
    std::signal(signal, SIG_DFL);
    std::raise(signal);  // pending until the handler returns, or until unblocked here
    if (!in_handler) pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
    return;
  }
  // From here a second signal ends the process by the default action, in the kernel, as it is
  // sent: it is fatal to the whole process once a thread that does not block it is there to take
  // it (this one, unblocked below, or one started before take_stop_signals). One that came after
  // the first and is pending ends the process when it is unblocked. Either way the orderly stop
  // never sees it: stop_signal() is set last, when no second signal has ended the process.
  // Before, this thread took a second signal with sigwait, and on a loaded machine the program
  // could finish its orderly stop before this thread ran to take it.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!in_handler) pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
  // write, not stdio: this may run as a signal handler.
  if (notice_length > 0 && ::write(STDERR_FILENO, notice_text, notice_length) < 0) {
    // The notice is a courtesy: the stop goes on without it.
  }
  stop_signal().store(signal);
}

extern "C" void on_stop_signal(int signal) { take(signal, true); }

}  // namespace

void take_stop_signals(const std::string& notice) {
  notice_length = notice.copy(notice_text, sizeof notice_text);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  std::thread([stops] {
    int signal = 0;
    while (sigwait(&stops, &signal) != 0) continue;  // fails only for a set it cannot wait on
    take(signal, false);
    // Stays, the stop signals unblocked, to be the thread that a second one ends the process on.
    for (;;) ::pause();
  }).detach();
}

void end_by(int signal) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::signal(signal, SIG_DFL);
  std::raise(signal);  // pending while blocked here (take_stop_signals): delivered on unblocking
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
}

int finish(int status) {
  if (const int signal = stop_signal().load(); signal != 0 && status == 128 + signal) end_by(signal);
  return status;
}

}  // namespace attn::examples
