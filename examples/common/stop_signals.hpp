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
/// is one, to standard error), and a second one ends the process as the signal would.
/// The signals are blocked in this thread and in every thread it starts later (OpenMP's), and
/// taken by a thread of their own that waits for them. A handler must not run on a thread that
/// is inside oneDNN's sgemm: before oneDNN 3.11 its kernels point the stack pointer into the
/// heap, and the handler's frame is written there (oneDNN issue #4845; Debian 12 has 2.6.3).
/// Call it before any computing thread starts. Threads started before it (an MPI library's,
/// which compute nothing) keep a handler that does the same.
void take_stop_signals(const std::string& notice = {});

}  // namespace attn::examples
