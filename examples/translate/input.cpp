#include "input.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include <attn/train/data.hpp>

#include "../common/stop_signals.hpp"

namespace attn::translator {

namespace {
constexpr std::size_t read_size = std::size_t{1} << 16;
// How long a wait for a pipe or a terminal lasts before a stop signal is looked for again.
constexpr int stop_check_ms = 100;
// Lines at hand are handed out when the input pauses this long, or has held them this long: a
// writer that pauses (a person, a program between its outputs) has its lines translated at once,
// and one that writes without pause (cat) fills the window, whose sort into batches of equal
// length is what makes decoding fast.
constexpr int pause_ms = 50;
constexpr auto longest_hold = std::chrono::seconds(1);
}  // namespace

input_lines::~input_lines() {
  if (owned_ && fd_ >= 0) ::close(fd_);
}

void input_lines::open(const std::filesystem::path& path) {
  if (path.empty()) {
    fd_ = STDIN_FILENO;
    name_ = "standard input";
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      throw train::data_error("cannot open " + text::detail::quoted(path) + ": " + train::detail::errno_message(errno));
    owned_ = true;
    name_ = path.string();
  }
  struct stat about {};
  if (::fstat(fd_, &about) != 0) return;  // read() will say what is wrong
  if (S_ISDIR(about.st_mode))
    throw train::data_error("cannot read " + name_ + ": " + train::detail::errno_message(EISDIR));
  if (!S_ISREG(about.st_mode)) return;
  start_offset_ = ::lseek(fd_, 0, SEEK_CUR);  // standard input may start past a file's beginning
  if (start_offset_ < 0) return;
  std::size_t lines = 0;
  for (std::vector<std::string> some; !(some = next(std::size_t{1} << 12)).empty();) lines += some.size();
  total_ = lines;
  rewind();
}

void input_lines::rewind() {
  if (::lseek(fd_, start_offset_, SEEK_SET) < 0)
    throw train::data_error("cannot read " + name_ + " again: " + train::detail::errno_message(errno));
  pending_.clear();
  first_ = scanned_ = read_ = 0;
  ended_ = false;
}

bool input_lines::waiting(int milliseconds) const {
  pollfd ready{fd_, POLLIN, 0};
  return ::poll(&ready, 1, milliseconds) == 0;
}

bool input_lines::fill() {
  if (first_ > 0) {  // drop what was handed out
    pending_.erase(0, first_);
    scanned_ -= first_;
    first_ = 0;
  }
  for (;;) {
    // Before each wait, not only after an idle one: a pipe that keeps writing slowly would
    // otherwise hold a stop back until a window is full.
    if (examples::stop_signal().load() != 0) return false;
    pollfd ready{fd_, POLLIN, 0};
    const int polled = ::poll(&ready, 1, stop_check_ms);
    if (polled < 0 && errno != EINTR && errno != EAGAIN)
      throw train::data_error("cannot wait for " + name_ + ": " + train::detail::errno_message(errno));
    if (polled <= 0) continue;
    const std::size_t size = pending_.size();
    pending_.resize(size + read_size);
    const ssize_t got = ::read(fd_, pending_.data() + size, read_size);
    pending_.resize(size + std::size_t(got > 0 ? got : 0));
    if (got > 0) return true;
    if (got == 0) {
      ended_ = true;
      return false;
    }
    if (errno != EINTR && errno != EAGAIN)  // a directory given as standard input: EISDIR
      throw train::data_error("cannot read " + name_ + ": " + train::detail::errno_message(errno));
  }
}

std::vector<std::string> input_lines::next(std::size_t count) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> lines;
  const auto take = [&](std::size_t end, std::size_t next) {
    lines.push_back(train::detail::finish_text_line(pending_.substr(first_, end - first_), ++read_, name_));
    first_ = scanned_ = next;
  };
  while (lines.size() < count) {
    if (const std::size_t newline = pending_.find('\n', scanned_); newline != std::string::npos) {
      take(newline, newline + 1);
      continue;
    }
    scanned_ = pending_.size();
    if (ended_) {  // a last line without '\n' counts; an empty input has no lines
      if (first_ < pending_.size()) take(pending_.size(), pending_.size());
      break;
    }
    // The lines at hand, rather than a wait for more, when a pipe or a terminal pauses (a file
    // never does).
    if (!lines.empty() && (std::chrono::steady_clock::now() - start > longest_hold || waiting(pause_ms))) break;
    if (!fill() && !ended_) break;  // stopped while waiting
  }
  return lines;
}

}  // namespace attn::translator
