// Training data: parallel text files read line by line, checked, and encoded into subword ids.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "../cpu/threads.hpp"
#include "../text/subword.hpp"
#include "../text/utf8.hpp"

namespace attn::train {

/// Training text that cannot be used: the message names the file (and line) and the problem.
class data_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Line i of `target` is the translation of line i of `source`.
struct parallel_text {
  std::vector<std::string> source, target;
};

namespace detail {

inline std::string errno_message(int error) {
  return std::error_code(error, std::generic_category()).message();
}

/// One line as read, '\n' already gone: checked for UTF-8 before anything is removed, so
/// the byte offset in an error is the one a hex viewer shows. A NUL byte is valid UTF-8 but no
/// text's: it is refused, since a file that has one is not text, or is UTF-16 (where every
/// ASCII character comes with a NUL), which is also what a UTF-16 byte-order mark says.
inline std::string finish_text_line(std::string line, std::size_t number, const std::filesystem::path& file) {
  const std::string where = file.string() + ":" + std::to_string(number) + ": ";
  constexpr const char* utf16 = " (UTF-16 text? convert it to UTF-8: iconv -f UTF-16 -t UTF-8)";
  if (const auto bad = text::first_invalid_utf8(line)) {
    const bool utf16_mark = number == 1 && (line.starts_with("\xFF\xFE") || line.starts_with("\xFE\xFF"));
    throw data_error(where + "invalid UTF-8 at byte " + std::to_string(*bad) + (utf16_mark ? utf16 : ""));
  }
  if (const std::size_t nul = line.find('\0'); nul != std::string::npos)
    throw data_error(where + "a NUL byte at byte " + std::to_string(nul) + ": not text" + utf16);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
  return line;
}

/// Every line of an open stream (standard input too), `file` naming it in errors. A last line
/// without '\n' counts; an empty stream has no lines.
inline std::vector<std::string> read_text_lines(std::FILE* stream, const std::filesystem::path& file) {
  std::vector<std::string> lines;
  std::string partial;  // a line that runs past the end of the buffer
  std::vector<char> buffer(std::size_t{1} << 20);
  for (;;) {
    const std::size_t got = std::fread(buffer.data(), 1, buffer.size(), stream);
    if (got == 0) {
      if (std::ferror(stream))  // a directory opens, then fails here with EISDIR
        throw data_error("cannot read " + attn::text::detail::quoted(file) + ": " + errno_message(errno));
      break;
    }
    const char* begin = buffer.data();
    const char* const end = begin + got;
    while (begin < end) {
      const auto* newline =
          static_cast<const char*>(std::memchr(begin, '\n', static_cast<std::size_t>(end - begin)));
      if (newline == nullptr) {
        partial.append(begin, end);
        break;
      }
      std::string line =
          partial.empty() ? std::string(begin, newline) : std::move(partial.append(begin, newline));
      partial.clear();
      lines.push_back(finish_text_line(std::move(line), lines.size() + 1, file));
      begin = newline + 1;
    }
  }
  if (!partial.empty()) lines.push_back(finish_text_line(std::move(partial), lines.size() + 1, file));
  return lines;
}

/// Every line of a text file.
inline std::vector<std::string> read_text_lines(const std::filesystem::path& file) {
  struct closer {
    void operator()(std::FILE* stream) const noexcept { std::fclose(stream); }
  };
  const std::unique_ptr<std::FILE, closer> stream(std::fopen(file.c_str(), "rb"));
  if (!stream) throw data_error("cannot open " + attn::text::detail::quoted(file) + ": " + errno_message(errno));
  return read_text_lines(stream.get(), file);
}

inline std::string line_count_text(std::size_t count) {
  return std::to_string(count) + (count == 1 ? " line" : " lines");
}

inline bool is_blank_line(std::string_view text) {
  return text.find_first_not_of(" \t\n\v\f\r") == std::string_view::npos;
}

}  // namespace detail

/// Reads two files of parallel text completely. A trailing '\r' (CRLF files) and a UTF-8
/// byte-order mark on the first line are removed; a last line without '\n' counts as a line.
/// Throws data_error naming the file when one cannot be opened or read, when a line is not
/// UTF-8 ("train.es:17: invalid UTF-8 at byte 5": 1-based line, 0-based byte within the line
/// as stored), or when the two files have different numbers of lines.
inline parallel_text read_parallel(const std::filesystem::path& source, const std::filesystem::path& target) {
  parallel_text text{detail::read_text_lines(source), detail::read_text_lines(target)};
  if (text.source.size() != text.target.size())
    throw data_error(attn::text::detail::quoted(source) + " has " + detail::line_count_text(text.source.size()) +
                     " but " + attn::text::detail::quoted(target) + " has " + std::to_string(text.target.size()));
  return text;
}

/// A sentence pair as subword ids, without bos or eos.
struct example {
  std::vector<std::int32_t> source, target;
};

/// What encode_pairs kept and skipped.
struct filter_report {
  std::size_t kept = 0, empty = 0, too_long = 0;
  std::vector<std::size_t> first_skipped_lines;  // 1-based, the first 5 skipped for either reason
  std::size_t max_tokens = 0;                    // the limit too_long refers to

  static constexpr std::size_t lines_listed = 5;

  /// "kept 998 of 1000 sentence pairs; skipped 1 empty and 1 longer than 100 subwords
  /// (lines 3, 17)"; "..." follows the lines when more than five were skipped.
  std::string summary() const {
    const std::size_t skipped = empty + too_long;
    std::string text = "kept " + std::to_string(kept) + " of " + std::to_string(kept + skipped) +
                       " sentence pairs; skipped " + std::to_string(empty) + " empty and " +
                       std::to_string(too_long) + " longer than " + std::to_string(max_tokens) +
                       " subwords";
    if (!first_skipped_lines.empty()) {
      text += " (lines ";
      for (std::size_t i = 0; i < first_skipped_lines.size(); ++i)
        text += (i > 0 ? ", " : "") + std::to_string(first_skipped_lines[i]);
      text += skipped > first_skipped_lines.size() ? ", ...)" : ")";
    }
    return text;
  }
};

/// Encodes every pair with the subword model, in order, on all OpenMP threads. Skips pairs
/// where either side is blank (only ASCII white space, or no subwords at all) and pairs where
/// either side has more than `max_tokens` subwords; `report` is overwritten with the counts.
inline std::vector<example> encode_pairs(const parallel_text& text, const text::subword_model& model,
                                         std::size_t max_tokens, filter_report& report) {
  if (text.source.size() != text.target.size())
    throw data_error("attn::train::encode_pairs: " + std::to_string(text.source.size()) +
                     " source sentences but " + std::to_string(text.target.size()) + " target sentences");
  enum class verdict : unsigned char { kept, empty, too_long };
  const std::size_t count = text.source.size();
  std::vector<example> encoded(count);
  std::vector<verdict> verdicts(count, verdict::kept);

  std::mutex failure_mutex;
  std::exception_ptr failure;  // exceptions must not leave an OpenMP region
  cpu_backend::parallel_for(static_cast<index_t>(count), 1, 256, [&](index_t begin, index_t end) {
    try {
      for (auto i = static_cast<std::size_t>(begin); i < static_cast<std::size_t>(end); ++i) {
        if (detail::is_blank_line(text.source[i]) || detail::is_blank_line(text.target[i])) {
          verdicts[i] = verdict::empty;
          continue;
        }
        example& pair = encoded[i];
        pair.source = model.encode(text.source[i]);
        pair.target = model.encode(text.target[i]);
        if (pair.source.empty() || pair.target.empty())  // e.g. only zero-width characters
          verdicts[i] = verdict::empty;
        else if (pair.source.size() > max_tokens || pair.target.size() > max_tokens)
          verdicts[i] = verdict::too_long;
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  });
  if (failure) std::rethrow_exception(failure);

  report = filter_report{};
  report.max_tokens = max_tokens;
  std::vector<example> kept;
  for (std::size_t i = 0; i < count; ++i) {
    if (verdicts[i] == verdict::kept) {
      ++report.kept;
      continue;
    }
    ++(verdicts[i] == verdict::empty ? report.empty : report.too_long);
    if (report.first_skipped_lines.size() < filter_report::lines_listed)
      report.first_skipped_lines.push_back(i + 1);
  }
  kept.reserve(report.kept);
  for (std::size_t i = 0; i < count; ++i)
    if (verdicts[i] == verdict::kept) kept.push_back(std::move(encoded[i]));
  return kept;
}

}  // namespace attn::train
