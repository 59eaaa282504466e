#include "output.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <iostream>
#include <stdexcept>
#include <system_error>

#include <attn/train/data.hpp>

namespace attn::translator {

std::string input_name(const options& o) { return o.input.empty() ? "standard input" : o.input.string(); }

std::string line_counts_differ(const std::filesystem::path& file, std::size_t lines, const options& o,
                               std::size_t input_lines) {
  return "'" + file.string() + "' has " + std::to_string(lines) + " lines but " + input_name(o) + " has " +
         std::to_string(input_lines);
}

std::string lines_past_input(const options& o, std::size_t input_lines) {
  for (int line : o.attention_lines)
    if (std::size_t(line) > input_lines)
      return "--attention-lines: line " + std::to_string(line) + " is past the input's " + std::to_string(input_lines) +
             " lines";
  return {};
}

std::string text_of(const job& j, std::span<const decode::token> tokens) {
  if (!j.opts.pieces) return j.vocabulary.decode(tokens);
  std::string text;
  for (const decode::token t : tokens) {
    if (!text.empty()) text += ' ';
    text += j.vocabulary.piece(t);
  }
  return text;
}

progress_line::progress_line(std::optional<std::size_t> sentences, bool quiet, const char* verb)
    : total_(sentences), quiet_(quiet), terminal_(isatty(STDERR_FILENO) == 1), verb_(verb) {}

void progress_line::advance(std::size_t sentences, std::size_t tokens) {
  done_ += sentences;
  tokens_ += tokens;
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!terminal_) {
    if (total_ ? done_ < next_report_ && done_ < *total_ : now - last_report_ < std::chrono::seconds(10)) return;
    if (total_) next_report_ = done_ + std::max<std::size_t>(1, *total_ / 10);
  }
  last_report_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = double(done_) / std::max(seconds, 1e-9);
  std::fprintf(stderr, "%s%s %zu", terminal_ ? "\r" : "", verb_, done_);
  if (total_) std::fprintf(stderr, "/%zu", *total_);
  std::fprintf(stderr, " sentences, %.1f sentences/s, %.0f tokens/s", rate, double(tokens_) / std::max(seconds, 1e-9));
  if (total_) std::fprintf(stderr, ", %.0f s left", double(*total_ - std::min(done_, *total_)) / std::max(rate, 1e-9));
  std::fputs(terminal_ ? "\033[K" : "\n", stderr);
  std::fflush(stderr);
}

double progress_line::finish() {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!quiet_) {
    if (terminal_) std::fputc('\n', stderr);
    std::fprintf(stderr, "%zu sentences, %zu output tokens in %.2f s: %.2f sentences/s, %.1f tokens/s\n", done_,
                 tokens_, seconds, double(done_) / seconds, double(tokens_) / seconds);
  }
  return seconds;
}

void progress_line::stop() {
  if (!quiet_ && terminal_) std::fputc('\n', stderr);
}

translation_writer::translation_writer(const job& j, std::optional<std::size_t> total)
    : j_(j),
      total_(total),
      clear_progress_(j.opts.output.empty() && isatty(STDOUT_FILENO) == 1 && isatty(STDERR_FILENO) == 1) {
  if (j.opts.output.empty()) return;
  file_.emplace(j.opts.output);
  // Beside the temporary, which is beside the file a link leads to: a rename never crosses file systems.
  if (!file_->in_place()) partial_ = file_->target().string() + ".partial";
}

std::optional<std::vector<std::string>> translation_writer::resume() {
  if (partial_.empty())
    throw std::runtime_error("--resume: " + j_.opts.output.string() +
                             " is written in place (a device or a pipe), so no run kept a .partial of it");
  std::error_code error;
  if (!std::filesystem::exists(partial_, error)) return std::nullopt;
  std::string text;
  {
    std::ifstream in(partial_, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) throw std::runtime_error("--resume: cannot read " + partial_.string());
  }
  // attn-translate writes whole lines: a last one without its line break was cut short.
  if (!text.empty() && text.back() != '\n')
    throw std::runtime_error("--resume: " + partial_.string() +
                             " does not end with a line break: it was cut short, not kept whole by attn-translate");
  std::vector<std::string> lines;  // checked as any text attn-translate reads
  for (std::size_t first = 0, end; first < text.size(); first = end + 1) {
    end = text.find('\n', first);
    lines.push_back(train::detail::finish_text_line(text.substr(first, end - first), lines.size() + 1, partial_));
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const std::size_t digits = line.find_first_not_of("0123456789");
    if (digits > 0 && digits != std::string::npos && line.compare(digits, 5, " ||| ") == 0)
      throw std::runtime_error("--resume: " + partial_.string() + ":" + std::to_string(i + 1) +
                               ": a line of --nbest, --with-scores or --score (\"i ||| ...\"); --resume goes on from "
                               "plain translations, a line each");
  }
  try {
    file_->write(text);
  } catch (...) {
    failed_ = true;
    throw;
  }
  written_ = window_first_ = lines.size();
  return lines;
}

void translation_writer::start_window(const std::vector<std::vector<decode::hypothesis>>& results) {
  window_first_ += done_.size();
  results_ = &results;
  done_.assign(results.size(), false);
}

void translation_writer::write(std::size_t line, std::string& text) const {
  const auto& hypotheses = (*results_)[line];
  line += window_first_;  // in the input
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
  std::size_t ready = written_ - window_first_;  // of the window
  for (; ready < done_.size() && done_[ready]; ++ready) write(ready, text);
  if (window_first_ + ready == written_) return;
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
  written_ = window_first_ + ready;
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
  const std::size_t done = window_first_ + std::size_t(std::count(done_.begin(), done_.end(), true));
  const bool one = written_ == 1 && !total_;
  const std::string first = one ? "the first line's translation"
                                : "the first " + std::to_string(written_) +
                                      (total_ ? " of " + std::to_string(*total_) : std::string()) + " lines' translations";
  const std::string are = one ? " is" : " are", were = one ? " was" : " were", them = one ? " it" : " them";
  const std::string out_of_order =
      done > written_ ? " (" + std::to_string(done - written_) + " more, translated out of order, are not)" : "";
  const std::string where = file_ ? j_.opts.output.string() : std::string("standard output");
  if (!file_ || file_->in_place()) {
    if (failed_) return first + were + " written to " + where + " before a write failed";
    if (file_) file_->commit();  // closed
    if (written_ == 0) return "no translation was written to " + where + out_of_order;
    return first + are + " written to " + where + out_of_order;
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
    return first + are + " left in " + file_->release_temporary().string() + ": keeping" + them + " as " + partial_.string() +
           " failed (" + e.what() + ")";
  }
  const bool plain = j_.opts.nbest == 1 && !j_.opts.with_scores && j_.targets.empty();  // what --resume takes
  return first + are + " kept in " + partial_.string() + out_of_order + (plain ? "; --resume goes on from there" : "");
}

std::vector<std::size_t> sample_lines(std::size_t count, std::size_t lines) {
  count = std::min(count, lines);
  std::vector<std::size_t> chosen;
  for (std::size_t k = 0; k < count; ++k) chosen.push_back(k * lines / count);
  return chosen;
}

void print_samples(const job& j, const std::map<std::size_t, std::string>& sources,
                   const std::vector<std::string>& best) {
  for (const std::size_t i : sample_lines(std::size_t(j.opts.samples), best.size())) {
    std::fprintf(stderr, "\n[line %zu]\n  source:      %s\n", i + 1, sources.at(i).c_str());
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
