// Tests of include/attn/train/launch.hpp with shell scripts for workers: a job that succeeds,
// one whose worker fails or is killed (the others stopped at once, the failure named), a worker
// that ignores SIGTERM (killed after the grace period), each worker's environment, a signal to
// the supervisor passed on (one it started with ignored kept ignored, the workers starting with
// both at their defaults), and a program that is not there.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <attn/train/launch.hpp>

#include "../scratch_dir.hpp"

namespace {

using namespace std::chrono_literals;

attn::train::worker shell(const std::string& script, const std::string& name, std::vector<std::string> environment = {}) {
  return {{"/bin/sh", "-c", script}, std::move(environment), name};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("train: a job whose workers all succeed ends with 0, and each sees its own environment") {
  attn::test::scratch_dir dir("launch");
  const std::vector<attn::train::worker> workers{
      shell("echo \"$ATTN_RANK of $ATTN_WORLD_SIZE\" > '" + (dir.path / "0").string() + "'", "rank 0",
            {"ATTN_RANK=0", "ATTN_WORLD_SIZE=2"}),
      shell("echo \"$ATTN_RANK of $ATTN_WORLD_SIZE\" > '" + (dir.path / "1").string() + "'", "rank 1",
            {"ATTN_RANK=1", "ATTN_WORLD_SIZE=2"}),
  };
  const auto outcome = attn::train::run_workers(workers, 1000ms);
  CHECK(outcome.status == 0);
  CHECK(outcome.message.empty());
  for (const char* rank : {"0", "1"}) {
    std::ifstream in(dir.path / rank);
    std::string line;
    std::getline(in, line);
    CHECK(line == std::string(rank) + " of 2");
  }
}

TEST_CASE("train: a worker that fails stops the others at once, and is named") {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<attn::train::worker> workers{shell("sleep 60", "rank 0"), shell("sleep 0.2; exit 3", "rank 1 (GPU 1)"),
                                                 shell("sleep 60", "rank 2")};
  const auto outcome = attn::train::run_workers(workers, 5000ms);
  CHECK(seconds_since(start) < 5);  // the sleepers end on SIGTERM, well before 60 s
  CHECK(outcome.status == 3);
  CHECK(outcome.message.find("rank 1 (GPU 1) (pid ") == 0);
  CHECK(outcome.message.find("exited with status 3; stopping the other processes") != std::string::npos);
}

TEST_CASE("train: a worker killed by a signal is named with it; one deaf to SIGTERM is killed after the grace") {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<attn::train::worker> workers{shell("trap '' TERM; sleep 60 & wait; sleep 60", "deaf"),
                                                 shell("sleep 0.2; kill -9 $$", "rank 1")};
  const auto outcome = attn::train::run_workers(workers, 1000ms);
  const double took = seconds_since(start);
  CHECK(took > 1);  // the grace period
  CHECK(took < 10);
  CHECK(outcome.status == 128 + SIGKILL);
  CHECK(outcome.stop_signal == 0);  // a worker's failure, not a stop: the supervisor exits with the status
  CHECK(outcome.message.find("rank 1 (pid ") == 0);
  CHECK(outcome.message.find("was killed by signal 9") != std::string::npos);
}

TEST_CASE("train: SIGTERM to the supervisor reaches every worker once, and the job ends with it") {
  attn::test::scratch_dir dir("launch-signal");
  const std::string marks = (dir.path / "marks").string();
  const std::vector<attn::train::worker> workers{
      shell("trap 'echo term >> \"" + marks + "\"; exit 143' TERM; sleep 60 & wait", "rank 0"),
      shell("trap 'echo term >> \"" + marks + "\"; exit 143' TERM; sleep 60 & wait", "rank 1")};
  std::thread sender([] {
    std::this_thread::sleep_for(300ms);
    ::kill(::getpid(), SIGTERM);
  });
  const auto start = std::chrono::steady_clock::now();
  const auto outcome = attn::train::run_workers(workers, 5000ms);
  sender.join();
  CHECK(seconds_since(start) < 10);
  CHECK(outcome.status == 128 + SIGTERM);
  CHECK(outcome.message == "stopped by signal 15; passed on to every process");
  CHECK(outcome.stop_signal == SIGTERM);
  std::ifstream in(marks);
  int lines = 0;
  for (std::string line; std::getline(in, line);) lines += line == "term";
  CHECK(lines == 2);
}

TEST_CASE("train: a supervisor started with a stop signal ignored keeps it ignored, the other stops the job, and the "
          "workers start with both at their default actions") {
  // A non-interactive shell's background job starts with SIGINT ignored: the script's Ctrl-C is
  // not the job's. The workers take both whatever the supervisor's: SIGTERM is how it stops them.
  for (const auto& [ignored, other] : {std::pair{SIGINT, SIGTERM}, std::pair{SIGTERM, SIGINT}}) {
    CAPTURE(ignored);
    struct sigaction ignore {}, old{};
    ignore.sa_handler = SIG_IGN;
    sigaction(ignored, &ignore, &old);
    attn::test::scratch_dir dir("launch-ignored");
    const std::string marks = (dir.path / "marks").string();
    // Each worker notes the signals it started with ignored (a shell cannot trap one of them),
    // then the signal that ends it, and ends its sleep: a shell's background command ignores
    // SIGINT, and would hold the test's output open for its 60 s.
    const std::string script = "grep SigIgn /proc/$$/status >> \"" + marks + "\"; trap 'echo stop >> \"" + marks +
                               "\"; kill $!; exit 1' INT TERM; sleep 60 & wait";
    const std::vector<attn::train::worker> workers{shell(script, "rank 0"), shell(script, "rank 1")};
    std::thread sender([ignored, other] {
      std::this_thread::sleep_for(300ms);
      ::kill(::getpid(), ignored);
      std::this_thread::sleep_for(300ms);
      ::kill(::getpid(), other);
    });
    const auto outcome = attn::train::run_workers(workers, 5000ms);
    sender.join();
    struct sigaction after {};
    sigaction(ignored, &old, &after);
    const bool still_ignored = after.sa_handler == SIG_IGN;  // and as it was once the job is over
    CHECK(still_ignored);
    CHECK(outcome.stop_signal == other);
    CHECK(outcome.message == "stopped by signal " + std::to_string(other) + "; passed on to every process");
    std::ifstream in(marks);
    int stops = 0, started = 0;
    for (std::string line; std::getline(in, line);) {
      if (line == "stop") {
        ++stops;
      } else if (line.rfind("SigIgn:", 0) == 0) {
        ++started;
        const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
        CHECK((mask & (1ull << (SIGINT - 1))) == 0);
        CHECK((mask & (1ull << (SIGTERM - 1))) == 0);
      }
    }
    CHECK(started == 2);
    CHECK(stops == 2);
  }
}

TEST_CASE("train: a worker that cannot be started is an error naming it") {
  const std::vector<attn::train::worker> workers{
      shell("sleep 60", "rank 0"), {{"/nonexistent/attn-train"}, {}, "rank 1"}};
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(attn::train::run_workers(workers, 1000ms),
                       doctest::Contains("cannot start rank 1 (/nonexistent/attn-train)"), std::runtime_error);
  CHECK(seconds_since(start) < 5);  // the one started was stopped
}
