#include "stop_signals.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

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

extern "C" void on_stop_signal(int signal) {
  // The first signal asks the program to stop when it can; a second one ends the process at once.
  if (stop_signal().exchange(signal) != 0) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  // write, not stdio: this may run as a signal handler.
  if (notice_length > 0 && ::write(STDERR_FILENO, notice_text, notice_length) < 0) return;
}

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
    for (;;) {
      int signal = 0;
      if (sigwait(&stops, &signal) != 0) continue;
      // A second signal ends the process: on_stop_signal raises it again, here unblocked.
      if (stop_signal().load() != 0) pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
      on_stop_signal(signal);
    }
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
