#include "output.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <system_error>

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

void progress_line::stop() {
  if (!quiet_ && terminal_) std::fputc('\n', stderr);
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

translation_writer::translation_writer(const job& j, const std::vector<std::vector<decode::hypothesis>>& results)
    : j_(j), results_(results), done_(results.size(), false),
      clear_progress_(j.opts.output.empty() && isatty(STDOUT_FILENO) == 1 && isatty(STDERR_FILENO) == 1) {
  if (j.opts.output.empty()) return;
  file_.emplace(j.opts.output);
  // Beside the temporary, which is beside the file a link leads to: a rename never crosses file systems.
  if (!file_->in_place()) partial_ = file_->target().string() + ".partial";
}

void translation_writer::write(std::size_t line, std::string& text) const {
  const auto& hypotheses = results_[line];
  // What the output says of the best: its text or pieces, or --score's line as given.
  const std::string best = j_.targets.empty() ? text_of(j_, hypotheses.front().tokens) : j_.targets[line];
  if (j_.opts.nbest == 1 && !j_.opts.with_scores && j_.targets.empty()) {
    text += best + '\n';
    return;
  }
  for (std::size_t k = 0; k < hypotheses.size(); ++k) {
    const auto& h = hypotheses[k];
    char scores[96];
    std::snprintf(scores, sizeof scores, "%.6f ||| %.6f ||| %.6f", h.score, h.log_prob,
                  h.log_prob / double(h.tokens.size() + 1));  // the end symbol is a token too
    text += std::to_string(line) + " ||| " + (k == 0 ? best : text_of(j_, h.tokens)) + " ||| " + scores + '\n';
  }
}

void translation_writer::finished(std::span<const std::size_t> lines) {
  for (const std::size_t line : lines) done_[line] = true;
  std::string text;
  std::size_t ready = written_;
  for (; ready < done_.size() && done_[ready]; ++ready) write(ready, text);
  if (ready == written_) return;
  try {
    if (file_) {
      file_->write(text);
    } else {
      // On a terminal, not after the progress line's text: the line is drawn again after the batch.
      if (clear_progress_) std::fputs("\r\033[K", stderr);
      if (!std::cout.write(text.data(), std::streamsize(text.size())).flush())
        throw std::runtime_error("cannot write the translations to standard output");
    }
  } catch (...) {
    failed_ = true;
    throw;
  }
  written_ = ready;
}

void translation_writer::commit() {
  if (!file_) return;
  file_->commit();
  std::error_code ignored;  // an earlier stopped run's, if any: this one is whole
  if (!partial_.empty()) std::filesystem::remove(partial_, ignored);
}

std::string translation_writer::keep_partial() {
  try {
    return keep_written();
  } catch (const std::exception& e) {  // closing a device, say
    return std::string("keeping the translations failed: ") + e.what();
  }
}

std::string translation_writer::keep_written() {
  const std::size_t lines = done_.size(), done = std::size_t(std::count(done_.begin(), done_.end(), true));
  const std::string first = "the first " + std::to_string(written_) + " of " + std::to_string(lines) + " lines' translations";
  const std::string out_of_order =
      done > written_ ? " (" + std::to_string(done - written_) + " more, translated out of order, are not)" : "";
  const std::string where = file_ ? j_.opts.output.string() : std::string("standard output");
  if (!file_ || file_->in_place()) {
    if (failed_) return first + " were written to " + where + " before a write failed";
    if (file_) file_->commit();  // closed
    return first + " are written to " + where + out_of_order;
  }
  if (failed_) return "no translation is kept: writing them failed";
  if (written_ == 0) {
    std::error_code ignored;  // an earlier stopped run's, which could be taken for this one's
    std::filesystem::remove(partial_, ignored);
    return "no line was translated in order, so none is kept" + out_of_order;
  }
  try {
    file_->commit_as(partial_);
  } catch (const std::exception& e) {
    return first + " are left in " + file_->release_temporary().string() + ": keeping them as " + partial_.string() +
           " failed (" + e.what() + ")";
  }
  return first + " are kept in " + partial_.string() + out_of_order;
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
  train::output_file out(path);  // whole or not at all
  out.write(value.dump(2) + '\n');
  out.commit();
}

}  // namespace attn::translator
