// Starting and supervising the processes of a data-parallel run on one machine (attn-train
// --gpus N: one process a GPU). Each worker is told its part through its environment (its rank,
// the job's size, the id of the job's communicator). When one fails, the others are stopped at
// once and the failure is named; SIGINT and SIGTERM sent to the supervisor reach every worker,
// once (unless the supervisor started with them ignored). POSIX (posix_spawn, waitpid).
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace attn::train {

/// One process of a job.
struct worker {
  std::vector<std::string> arguments;    // argv, the program first (found on PATH if it has no '/')
  std::vector<std::string> environment;  // "NAME=value", added to the supervisor's (replacing the same NAME)
  std::string name;                      // in messages: "rank 1 (GPU 1)"
};

/// How a job ended.
struct job_outcome {
  int status = 0;       // 0; the first failed worker's exit status, or 128 + the signal that ended it;
                        // 128 + the signal the supervisor received, when it was stopped
  std::string message;  // which worker failed and how, or which signal stopped the job; empty on success
  int stop_signal = 0;  // the signal the supervisor received and passed on, when that stopped the job
};

namespace detail {

/// The last signal the supervisor received, and how many it has received.
inline std::atomic<int>& supervisor_signal() {
  static std::atomic<int> received{0};
  return received;
}
inline std::atomic<int>& supervisor_signals() {
  static std::atomic<int> count{0};
  return count;
}
extern "C" inline void on_supervisor_signal(int signal) {
  detail::supervisor_signal().store(signal);
  detail::supervisor_signals().fetch_add(1);
}

/// The supervisor's environment with `extra` replacing or adding variables.
inline std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> merged;
  for (char** variable = environ; variable != nullptr && *variable != nullptr; ++variable) {
    const std::string entry(*variable);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& e : extra) replaced = replaced || e.substr(0, e.find('=')) == name;
    if (!replaced) merged.push_back(entry);
  }
  merged.insert(merged.end(), extra.begin(), extra.end());
  return merged;
}

/// "exited with status 3", "was killed by signal 9 (Killed)".
inline std::string describe_exit(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  const int signal = WTERMSIG(wait_status);
  const char* name = strsignal(signal);
  return "was killed by signal " + std::to_string(signal) + (name ? std::string(" (") + name + ")" : "");
}

inline int exit_status(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

}  // namespace detail

/// Starts every worker, each in a process group of its own (a terminal's Ctrl-C reaches the
/// supervisor alone, which passes it on once), and waits for them. When one fails (a non-zero
/// status or a signal) before the job was stopped, the others receive SIGTERM, and SIGKILL if
/// still running `grace` later. SIGINT or SIGTERM received meanwhile is sent on to every worker,
/// which then end as they do on that signal. Throws std::runtime_error if a worker cannot be
/// started (the ones started are stopped first). A second signal is passed on too: the
/// trainer's workers end at once on a second one. A signal that is ignored when this is called
/// stays ignored here, and is not passed on; the workers start with SIGINT and SIGTERM at their
/// default actions.
inline job_outcome run_workers(std::span<const worker> workers, std::chrono::milliseconds grace) {
  struct sigaction handler {}, old_int{}, old_term{};
  handler.sa_handler = detail::on_supervisor_signal;
  sigemptyset(&handler.sa_mask);
  detail::supervisor_signal().store(0);
  detail::supervisor_signals().store(0);
  // A signal ignored when the job starts stays ignored here (a non-interactive shell starts its
  // background jobs with SIGINT ignored): it is not passed on. The workers start with both at
  // their default actions whatever the supervisor's, for SIGTERM is how it stops them (and how
  // the kernel does once it has ended, attn-train's PR_SET_PDEATHSIG).
  for (const auto& [signal, old] : {std::pair{SIGINT, &old_int}, std::pair{SIGTERM, &old_term}}) {
    sigaction(signal, nullptr, old);
    if ((old->sa_flags & SA_SIGINFO) != 0 || old->sa_handler != SIG_IGN) sigaction(signal, &handler, nullptr);
  }
  sigset_t stops;  // what the workers start with at their default actions
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  struct restore_handlers {
    struct sigaction* old_int;
    struct sigaction* old_term;
    ~restore_handlers() {
      sigaction(SIGINT, old_int, nullptr);
      sigaction(SIGTERM, old_term, nullptr);
    }
  } restore{&old_int, &old_term};

  std::vector<pid_t> pids;
  std::vector<bool> running;
  auto signal_all = [&](int signal) {  // each worker's whole process group: what it started too
    for (std::size_t i = 0; i < pids.size(); ++i)
      if (running[i]) ::kill(-pids[i], signal);
  };
  for (const worker& w : workers) {
    std::vector<std::string> environment = detail::environment_with(w.environment);
    std::vector<char*> argv, envp;
    for (const std::string& a : w.arguments) argv.push_back(const_cast<char*>(a.c_str()));
    for (const std::string& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attributes, 0);
    posix_spawnattr_setsigdefault(&attributes, &stops);
    pid_t pid = 0;
    const int error = posix_spawnp(&pid, argv.front(), nullptr, &attributes, argv.data(), envp.data());
    posix_spawnattr_destroy(&attributes);
    if (error != 0) {
      signal_all(SIGKILL);
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (running[i]) ::waitpid(pids[i], nullptr, 0);
      throw std::runtime_error("cannot start " + w.name + " (" + w.arguments.front() + "): " + std::strerror(error));
    }
    pids.push_back(pid);
    running.push_back(true);
  }

  job_outcome outcome;
  bool stopping = false;  // a failure or a signal: the others are being stopped
  int forwarded = 0;  // signals passed on
  std::chrono::steady_clock::time_point kill_at{};
  for (std::size_t left = pids.size(); left > 0;) {
    if (detail::supervisor_signals().load() > forwarded) {
      const int signal = detail::supervisor_signal().load();
      signal_all(signal);
      ++forwarded;
      if (!stopping) {
        stopping = true;
        outcome = {128 + signal, std::string("stopped by signal ") + std::to_string(signal) + "; passed on to every process",
                   signal};
      }
    }
    int wait_status = 0;
    const pid_t done = ::waitpid(-1, &wait_status, WNOHANG);
    if (done > 0) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] != done || !running[i]) continue;
        running[i] = false;
        --left;
        const bool failed = !WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0;
        if (failed && !stopping) {
          stopping = true;
          outcome = {detail::exit_status(wait_status),
                     workers[i].name + " (pid " + std::to_string(done) + ") " + detail::describe_exit(wait_status) +
                         "; stopping the other processes"};
          signal_all(SIGTERM);
          kill_at = std::chrono::steady_clock::now() + grace;
        }
      }
      continue;
    }
    if (done < 0 && errno != EINTR && errno != ECHILD) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    if (kill_at != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() >= kill_at) {
      signal_all(SIGKILL);
      kill_at = {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return outcome;
}

}  // namespace attn::train
