#include "output.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include <attn/train/output_file.hpp>

namespace attn::translator {

std::string input_name(const options& o) { return o.input.empty() ? "standard input" : o.input.string(); }

std::string text_of(const job& j, std::span<const decode::token> tokens) {
  if (!j.opts.pieces) return j.vocabulary.decode(tokens);
  std::string text;
  for (const decode::token t : tokens) {
    if (!text.empty()) text += ' ';
    text += j.vocabulary.piece(t);
  }
  return text;
}

progress_line::progress_line(std::size_t sentences, bool quiet, const char* verb)
    : total_(sentences), quiet_(quiet), terminal_(isatty(STDERR_FILENO) == 1), verb_(verb) {}

void progress_line::advance(std::size_t sentences, std::size_t tokens) {
  done_ += sentences;
  tokens_ += tokens;
  if (quiet_ || (!terminal_ && done_ < next_report_ && done_ < total_)) return;
  next_report_ = done_ + std::max<std::size_t>(1, total_ / 10);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = double(done_) / std::max(seconds, 1e-9);
  std::fprintf(stderr, "%s%s %zu/%zu sentences, %.1f sentences/s, %.0f tokens/s, %.0f s left%s",
               terminal_ ? "\r" : "", verb_, done_, total_, rate, double(tokens_) / std::max(seconds, 1e-9),
               double(total_ - done_) / std::max(rate, 1e-9), terminal_ ? "\033[K" : "\n");
  std::fflush(stderr);
}

double progress_line::finish() {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!quiet_) {
    if (terminal_) std::fputc('\n', stderr);
    std::fprintf(stderr, "%zu sentences, %zu output tokens in %.2f s: %.2f sentences/s, %.1f tokens/s\n", total_,
                 tokens_, seconds, double(total_) / seconds, double(tokens_) / seconds);
  }
  return seconds;
}

namespace {
/// Writes what `write` puts in a stream to `path` whole or not at all (train::output_file: a
/// temporary beside it, synced and renamed into place; a device or a pipe in place). Errors name
/// `path` and the reason.
template <class Write>
void write_atomically(const std::filesystem::path& path, Write&& write) {
  std::ostringstream text;
  write(text);
  train::output_file out(path);
  out.write(std::move(text).str());
  out.commit();
}

void write_lines(std::ostream& out, const job& j, const std::vector<std::vector<decode::hypothesis>>& results,
                 const std::vector<std::string>& best) {
  const bool scored = j.opts.nbest > 1 || j.opts.with_scores || !j.targets.empty();
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!scored) {
      out << best[i] << '\n';
      continue;
    }
    for (std::size_t k = 0; k < results[i].size(); ++k) {
      const auto& h = results[i][k];
      char scores[96];
      std::snprintf(scores, sizeof scores, "%.6f ||| %.6f ||| %.6f", h.score, h.log_prob,
                    h.log_prob / double(h.tokens.size() + 1));  // the end symbol is a token too
      out << i << " ||| " << (k == 0 ? best[i] : text_of(j, h.tokens)) << " ||| " << scores << '\n';
    }
  }
}
}  // namespace

void write_translations(const job& j, const std::vector<std::vector<decode::hypothesis>>& results,
                        const std::vector<std::string>& best) {
  if (j.opts.output.empty()) {
    write_lines(std::cout, j, results, best);
    if (!std::cout.flush()) throw std::runtime_error("cannot write the translations to standard output");
    return;
  }
  write_atomically(j.opts.output, [&](std::ostream& out) { write_lines(out, j, results, best); });
}

void print_samples(const job& j, const std::vector<std::string>& best) {
  const std::size_t count = std::min<std::size_t>(std::size_t(j.opts.samples), best.size());
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t i = k * best.size() / count;
    std::fprintf(stderr, "\n[line %zu]\n  source:      %s\n", i + 1, j.lines[i].c_str());
    if (!j.references.empty()) std::fprintf(stderr, "  reference:   %s\n", j.references[i].c_str());
    std::fprintf(stderr, "  translation: %s\n", best[i].c_str());
  }
  std::fputc('\n', stderr);
}

void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& value) {
  write_atomically(path, [&](std::ostream& out) { out << value.dump(2) << '\n'; });
}

}  // namespace attn::translator
