// What attn-translate writes besides translations' search: the progress line, the output
// file, the scores and sample lines.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <attn/decode/search.hpp>
#include <nlohmann/json.hpp>

#include "job.hpp"

namespace attn::translator {

/// "FILE" or "standard input", for messages about input lines.
std::string input_name(const options& o);

/// Sentences translated, their rate and the time left: rewritten in place on a terminal,
/// a line at every tenth of the work otherwise.
class progress_line {
 public:
  progress_line(std::size_t sentences, bool quiet, const char* verb = "translated");
  void advance(std::size_t sentences, std::size_t tokens);
  /// Ends the line; returns the seconds spent.
  double finish();
  std::size_t tokens() const { return tokens_; }

 private:
  std::size_t total_, done_ = 0, tokens_ = 0, next_report_ = 0;
  bool quiet_, terminal_;
  const char* verb_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// What a line of output says of `tokens`: their text, or with --pieces their pieces, space-separated.
std::string text_of(const job& j, std::span<const decode::token> tokens);

/// The best translation of each line, in input order, to --output (written whole, then renamed
/// into place) or standard output. With --nbest K > 1, --with-scores or --score, a line for each
/// hypothesis: "i ||| text ||| score ||| log-prob ||| log-prob per token" (`best` gives what
/// to write of each line's first: its text, its pieces, or --score's line).
void write_translations(const job& j, const std::vector<std::vector<decode::hypothesis>>& results,
                        const std::vector<std::string>& best);

/// A few lines, evenly spread over the input: source, reference and translation.
void print_samples(const job& j, const std::vector<std::string>& best);

void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& value);

}  // namespace attn::translator
