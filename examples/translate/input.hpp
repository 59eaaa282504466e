// attn-translate's input, read as decoding goes: a window of lines at a time, or what a pipe
// has written before it pauses. So the program is a filter: a line typed at a terminal or written
// to a pipe is translated without waiting for the end of the input or for a window's worth, and
// only a window's lines are held at once.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace attn::translator {

/// Lines of a file or of standard input, checked as attn-train checks its text
/// (train::detail::finish_text_line: UTF-8, no NUL; '\r' and a byte-order mark dropped). A
/// regular file (standard input redirected from one too) is read through once when opened: its
/// lines are counted and checked, so that a bad line is an error before any decoding and the
/// total is known. A pipe or a terminal is read as it comes.
class input_lines {
 public:
  input_lines() = default;
  ~input_lines();
  input_lines(const input_lines&) = delete;
  input_lines& operator=(const input_lines&) = delete;

  /// Opens `path`, or standard input when it is empty.
  void open(const std::filesystem::path& path);
  /// Up to `count` more lines; fewer at the end of the input, none after it. From a pipe or a
  /// terminal, those it has once the input pauses or has held them a while (at least one, unless
  /// the input ends or a stop comes first). While it waits it heeds a stop signal
  /// (examples/common/stop_signals.hpp): it returns the lines it has then.
  std::vector<std::string> next(std::size_t count);
  /// How many lines the input holds, where that is known before its end (a regular file).
  std::optional<std::size_t> total() const { return total_; }
  /// Whether every line has been handed out (the end of the input was read).
  bool ended() const { return ended_ && first_ == pending_.size(); }

 private:
  /// Reads more of the input into pending_; false at its end, or when a stop came first.
  bool fill();
  /// Whether nothing comes to read within `milliseconds` (a pipe or a terminal; a file always has).
  bool waiting(int milliseconds) const;
  /// Back to the first line (a regular file, after counting it).
  void rewind();

  int fd_ = -1;
  bool owned_ = false;  // opened here (a file), not standard input
  long long start_offset_ = 0;  // where a regular file's lines start (standard input may be past 0)
  std::string name_;  // "FILE" or "standard input", in messages
  std::optional<std::size_t> total_;
  std::size_t read_ = 0;  // lines handed out, for their numbers in messages
  std::string pending_;     // bytes read and not yet handed out, from first_
  std::size_t first_ = 0;   // where pending_'s next line starts
  std::size_t scanned_ = 0;  // pending_ holds no '\n' in [first_, scanned_)
  bool ended_ = false;      // the input's end was read
};

}  // namespace attn::translator
