// What attn-translate writes besides translations' search: the progress line, the output
// as it is done, the scores and sample lines.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <attn/decode/search.hpp>
#include <attn/train/output_file.hpp>
#include <nlohmann/json.hpp>

#include "job.hpp"

namespace attn::translator {

/// "FILE" or "standard input", for messages about input lines.
std::string input_name(const options& o);

/// "'FILE' has N lines but INPUT has M": --bleu's or --score's lines do not match the input's.
std::string line_counts_differ(const std::filesystem::path& file, std::size_t lines, const options& o,
                               std::size_t input_lines);
/// Which --attention-lines lie past an input of `input_lines` lines, as an error message; empty
/// when none does.
std::string lines_past_input(const options& o, std::size_t input_lines);

/// Sentences translated, their rate and the time left: rewritten in place on a terminal,
/// a line at every tenth of the work otherwise. Where the total is not known (a pipe), the
/// count and rate alone, at most every ten seconds when not on a terminal.
class progress_line {
 public:
  progress_line(std::optional<std::size_t> sentences, bool quiet, const char* verb = "translated");
  void advance(std::size_t sentences, std::size_t tokens);
  /// Ends the line; returns the seconds spent.
  double finish();
  /// Ends the line without a summary: the work stopped before its end.
  void stop();
  std::size_t tokens() const { return tokens_; }

 private:
  std::optional<std::size_t> total_;
  std::size_t done_ = 0, tokens_ = 0, next_report_ = 0;
  bool quiet_, terminal_;
  const char* verb_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_report_ = start_;
};

/// What a line of output says of `tokens`: their text, or with --pieces their pieces, space-separated.
std::string text_of(const job& j, std::span<const decode::token> tokens);

/// The output, written as it is done: each input line as soon as it and every line before it
/// are translated (in decoding's windows of sorted batches, at the end of each window). To
/// --output through a temporary renamed into place once every line is done (train::output_file),
/// or to standard output, flushed as it goes. The best translation of each line; with --nbest K
/// > 1, --with-scores or --score, a line for each hypothesis: "i ||| text ||| score ||| log-prob
/// ||| log-prob per token", where text is the translation's, its pieces, or --score's line.
class translation_writer {
 public:
  /// `total`: the input's lines, where known before its end (for messages).
  translation_writer(const job& j, std::optional<std::size_t> total);
  /// --resume: the lines of FILE.partial, a stopped run's translations of the input's first lines,
  /// written first; nothing where there is no FILE.partial. A file cut short (no last line break)
  /// or of --nbest's lines is refused. FILE.partial itself is left as it is until this run
  /// commits (and removes it) or stops (and replaces it with all it has).
  std::optional<std::vector<std::string>> resume();
  /// The next window: its lines follow those of the windows before; `results` [its lines] is
  /// filled in as they are done, and is read until the window is written.
  void start_window(const std::vector<std::vector<decode::hypothesis>>& results);
  /// These lines of the window (0 is its first) are done: writes those now ready.
  void finished(std::span<const std::size_t> lines);
  /// Every line done and written: the output put in place (and an earlier stopped run's
  /// FILE.partial removed).
  void commit();
  /// Stopped before the end (a signal, an error): keeps the lines written, as --output's name
  /// with ".partial" (standard output, devices and pipes have them already). Returns a sentence
  /// that says which lines are where, or why keeping them failed. A file is not kept after a
  /// failed write, whose content is then unknown.
  std::string keep_partial();
  /// FILE.partial for --output FILE (empty where the output is written in place).
  const std::filesystem::path& partial() const { return partial_; }

 private:
  std::string keep_written();  // keep_partial, which may throw
  void write(std::size_t line, std::string& text) const;  // line: of the window

  const job& j_;
  std::optional<std::size_t> total_;
  const std::vector<std::vector<decode::hypothesis>>* results_ = nullptr;  // the window's
  std::vector<bool> done_;   // the window's lines done
  std::size_t window_first_ = 0;  // the window's first line in the input
  std::size_t written_ = 0;  // lines 0 .. written_ - 1 of the input are written
  std::optional<train::output_file> file_;  // --output, or none: standard output
  std::filesystem::path partial_;           // where a stopped run keeps its lines (none in place)
  bool clear_progress_;                     // standard output and the progress line share a terminal
  bool failed_ = false;                     // a write failed: what the file holds is unknown
};

/// The `count` lines (from 0) that --samples shows of an input of `lines`: evenly spread.
std::vector<std::size_t> sample_lines(std::size_t count, std::size_t lines);

/// A few lines, evenly spread over the input (sample_lines): source, reference and translation;
/// `sources` holds at least those lines.
void print_samples(const job& j, const std::map<std::size_t, std::string>& sources,
                   const std::vector<std::string>& best);

void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& value);

}  // namespace attn::translator
