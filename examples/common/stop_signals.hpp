// SIGINT and SIGTERM as requests to stop: attn-train saves a checkpoint and stops after its
// step, attn-translate keeps the lines it has translated and stops after its batch. A second
// signal ends the process at once.
#pragma once

#include <atomic>
#include <string>

namespace attn::examples {

/// The signal that asked the program to stop (SIGINT, SIGTERM), or 0.
std::atomic<int>& stop_signal();

/// From now on the first SIGINT or SIGTERM sets stop_signal() (and writes `notice`, when there
/// is one, to standard error), and a second one ends the process as the signal would. Before
/// stop_signal() is set the actions of the signals taken are reset to the default, so a second
/// signal ends the process as it is sent (the kernel ends it then, not when a thread gets to run):
/// an orderly stop that has seen stop_signal() cannot outrun it, however loaded the machine.
/// (Two signals of one kind sent before the process has taken the first are one signal: the
/// kernel keeps one of each kind pending. And where threads started before this one take the
/// signals too, a second signal that one of them took before the first's handler had reset the
/// actions ends the process only once that thread runs on.)
/// The signals are blocked in this thread and in every thread it starts later (OpenMP's), and
/// handled on a thread of their own that waits for them. A handler must not run on a thread that
/// is inside oneDNN's sgemm: before oneDNN 3.11 its kernels point the stack pointer into the
/// heap, and the handler's frame is written there (oneDNN issue #4845; Debian 12 has 2.6.3).
/// A signal that is ignored when this is called stays ignored, as in programs that follow the
/// convention: a non-interactive shell starts its background jobs with SIGINT ignored, so that the
/// Ctrl-C meant for a script does not stop them.
/// Call it before any other thread starts: before an MPI library's (whose initialisation leaves
/// these signals' actions and the mask alone; Open MPI 4.1 checked), and before any computing
/// thread. Threads started before it may run the same handler.
void take_stop_signals(const std::string& notice = {});

/// While one lives, the program has nothing that a stop should keep (attn-train preparing its
/// vocabulary and data, which a run started again prepares anew): a first signal ends the process
/// at once, as a second one would, after writing `notice` to standard error when there is one. A
/// first signal taken before it was made stays a request to stop, for the program to see in
/// stop_signal(). One at a time; made after take_stop_signals.
class nothing_to_keep {
 public:
  explicit nothing_to_keep(const std::string& notice = {});
  ~nothing_to_keep();
  nothing_to_keep(const nothing_to_keep&) = delete;
  nothing_to_keep& operator=(const nothing_to_keep&) = delete;
};

/// Ends the process by `signal` itself, its action reset to the default, once the program has
/// done what a stop asks of it (a checkpoint saved, the lines done kept): how a program that
/// handles SIGINT should end (https://www.cons.org/cracauer/sigint.html). A shell tells the two
/// endings apart: bash stops a loop or a script whose command was killed by SIGINT, and goes on
/// after one that exited with 130. Flushes the C and C++ output streams first, since the process
/// ends without returning from main. Returns only if the signal did not end it.
void end_by(int signal);

/// `status`, after ending the process by the stop signal when the status says the program was
/// stopped by it (128 + stop_signal()): main's last word, `return examples::finish(run(...))`.
int finish(int status);

}  // namespace attn::examples
