#include "stop_signals.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <future>
#include <iostream>
#include <iterator>
#include <string>
#include <thread>

namespace attn::examples {

std::atomic<int>& stop_signal() {
  static std::atomic<int> signal{0};
  return signal;
}

namespace {

// Set before the handler is, read only after; a plain array, which outlives every thread.
char notice_text[512];
std::size_t notice_length = 0;

// The stop signals, and whether take_stop_signals took each: one ignored when it ran stays
// ignored, the convention of programs that handle SIGINT (a shell starts a script's background
// jobs with SIGINT ignored, for the script's Ctrl-C is not theirs). Set before the handler is;
// atomic, as a thread started earlier may run the handler.
constexpr int stop_signal_numbers[] = {SIGINT, SIGTERM};
std::atomic<bool> taken[std::size(stop_signal_numbers)] = {};
static_assert(std::atomic<bool>::is_always_lock_free, "read in a signal handler");

// Whether a handler has taken a first signal (on the signal thread, or on a thread started
// before take_stop_signals).
std::atomic<bool> first_taken{false};

// While a nothing_to_keep lives: a first signal ends the process, after its notice (written
// before the flag is set, read after it is seen).
char at_once_text[512];
std::size_t at_once_length = 0;
std::atomic<bool> at_once{false};

sigset_t stop_signals() {
  sigset_t stops;
  sigemptyset(&stops);
  for (const int signal : stop_signal_numbers) sigaddset(&stops, signal);
  return stops;
}

// Runs with SIGINT and SIGTERM blocked (the handler's mask), so that a second signal cannot
// interrupt it and run first. Calls only async-signal-safe functions: signal, raise,
// pthread_sigmask, write.
extern "C" void on_stop_signal(int signal) {
  const int saved_errno = errno;
  const sigset_t stops = stop_signals();
  // A second signal, taken before the first's handler reset the actions, or a first one while
  // there is nothing to keep: the process ends by it.
  const bool second = first_taken.exchange(true);
  if (second || at_once.load()) {
    if (!second && at_once_length > 0 && ::write(STDERR_FILENO, at_once_text, at_once_length) < 0) {
      // A courtesy, as the notice below.
    }
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);  // delivered here: the process ends
    return;
  }
  // From here a second signal ends the process by the default action, in the kernel as it is
  // sent: a fatal signal that some thread does not block (the signal thread does not) ends the
  // whole process at once. One sent since this handler began is pending, and ends the process
  // when unblocked below. Either way before stop_signal() is set: the orderly stop never sees it.
  for (std::size_t i = 0; i < std::size(stop_signal_numbers); ++i) {
    if (taken[i].load(std::memory_order_relaxed)) std::signal(stop_signal_numbers[i], SIG_DFL);
  }
  pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
  if (notice_length > 0 && ::write(STDERR_FILENO, notice_text, notice_length) < 0) {
    // The notice is a courtesy: the stop goes on without it.
  }
  stop_signal().store(signal);
  errno = saved_errno;
}

}  // namespace

void take_stop_signals(const std::string& notice) {
  notice_length = notice.copy(notice_text, sizeof notice_text);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_mask = stop_signals();
  action.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < std::size(stop_signal_numbers); ++i) {
    struct sigaction old {};
    sigaction(stop_signal_numbers[i], nullptr, &old);
    const bool ignored = (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_IGN;
    taken[i].store(!ignored);
    if (!ignored) sigaction(stop_signal_numbers[i], &action, nullptr);
  }
  // The thread that takes the signals, started before they are blocked here, so that it never
  // blocks them, and running before this returns (a new thread blocks every signal until it
  // runs): a second signal finds it ready however soon it comes. It computes nothing, so the
  // handler never runs inside a kernel. Not sigwait: a thread waiting in sigwait for a signal
  // whose action is the default takes it as a wake-up, not as the end of the process, and the
  // process would end only once that thread ran.
  std::promise<void> running;
  std::future<void> started = running.get_future();
  std::thread([running = std::move(running)]() mutable {
    const sigset_t stops = stop_signals();
    pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);  // even if the process started with them blocked
    running.set_value();
    for (;;) ::pause();
  }).detach();
  started.wait();
  const sigset_t stops = stop_signals();
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);  // here, and in every thread started from here
}

nothing_to_keep::nothing_to_keep(const std::string& notice) {
  at_once_length = notice.copy(at_once_text, sizeof at_once_text);
  at_once.store(true);
}

nothing_to_keep::~nothing_to_keep() { at_once.store(false); }

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
