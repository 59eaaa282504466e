// Corpus BLEU as sacreBLEU computes it by default (Post, 2018, "A Call for Clarity in Reporting BLEU
// Scores"), matched against sacreBLEU 2.6.0: the "13a" tokenizer, n-grams up to order 4, "exp"
// smoothing, the closest reference length, mixed case. The computation follows sacreBLEU's operation
// for operation; the tests hold scores to sacreBLEU's within a relative 1e-12, and
// tests/unit/text/sacrebleu_values.py prints the values they compare with.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ranges>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "utf8.hpp"

namespace attn::text {

namespace detail {

/// Whether Python's str.isspace() holds, which is what str.split() and str.rstrip() break and strip
/// on: the ASCII blanks, the four information separators U+001C..U+001F, and Unicode's spaces and
/// line and paragraph separators. Zero-width space (U+200B) is not one.
constexpr bool is_python_space(char32_t c) noexcept {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

/// The words of `text` as Python's str.split() finds them: runs of characters between whitespace.
inline std::vector<std::string_view> split_python_words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t word_begin = 0, offset = 0;
  bool in_word = false;
  while (offset < text.size()) {
    const utf8_char next = utf8_char_at(text, offset);
    if (is_python_space(next.code_point)) {
      if (in_word) words.push_back(text.substr(word_begin, offset - word_begin));
      in_word = false;
    } else if (!in_word) {
      word_begin = offset;
      in_word = true;
    }
    offset += next.length;
  }
  if (in_word) words.push_back(text.substr(word_begin));
  return words;
}

/// `text` without trailing whitespace, as Python's str.rstrip() leaves it.
inline std::string_view rstrip_python(std::string_view text) {
  std::size_t content_end = 0, offset = 0;
  while (offset < text.size()) {
    const utf8_char next = utf8_char_at(text, offset);
    offset += next.length;
    if (!is_python_space(next.code_point)) content_end = offset;
  }
  return text.substr(0, content_end);
}

/// Python's str.replace: one left-to-right pass, so text a replacement forms is not replaced again.
inline std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string replaced;
  replaced.reserve(text.size());
  std::size_t start = 0;
  for (std::size_t found = text.find(from); found != std::string_view::npos; found = text.find(from, start)) {
    replaced.append(text, start, found - start);
    replaced.append(to);
    start = found + from.size();
  }
  replaced.append(text, start);
  return replaced;
}

/// `value` with `decimals` digits after the point, as Python's f"{value:.{decimals}f}" prints it:
/// correctly rounded and independent of the C locale, unlike printf.
inline std::string fixed_decimals(double value, int decimals) {
  char buffer[512];  // room for the 309 integer digits of the largest double
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, decimals);
  if (result.ec != std::errc{}) throw std::invalid_argument("fixed_decimals: too many decimals");
  return std::string(buffer, result.ptr);
}

constexpr bool is_ascii_digit(char c) noexcept { return c >= '0' && c <= '9'; }
constexpr bool is_period_or_comma(char c) noexcept { return c == '.' || c == ','; }

/// The class [\{-\~\[-\` -\&\(-\+\:-\@\/] of sacreBLEU's first tokenizer rule: ASCII punctuation
/// and symbols except the apostrophe, '-', '.' and ',', which have rules of their own or none.
constexpr bool is_13a_symbol(char c) noexcept {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

/// re.sub of a pattern that matches exactly two characters: a left-to-right scan that, after a
/// match, resumes behind it. Working on UTF-8 bytes gives the same matches as Python does on code
/// points, because every pattern's second character, or first, is ASCII, and an ASCII byte is never
/// part of a multi-byte character.
template <typename Matches, typename Append>
std::string substitute_pairs(const std::string& text, Matches matches, Append append_replacement) {
  std::string substituted;
  substituted.reserve(text.size() + text.size() / 2);
  std::size_t i = 0;
  while (i < text.size()) {
    if (i + 1 < text.size() && matches(text[i], text[i + 1])) {
      append_replacement(substituted, text[i], text[i + 1]);
      i += 2;
    } else {
      substituted += text[i++];
    }
  }
  return substituted;
}

/// Counts of the n-grams of one order; the keys view the token text that produced them. Tokens
/// hold no spaces, so a run of n tokens and the text from the first to the last of them are
/// equivalent keys, and n-grams of different orders never collide.
using ngram_counts = std::unordered_map<std::string_view, std::uint32_t>;

inline ngram_counts count_word_ngrams(std::string_view tokenized, const std::vector<std::string_view>& tokens,
                                      std::size_t order) {
  ngram_counts counts;
  for (std::size_t first = 0; first + order <= tokens.size(); ++first) {
    const std::size_t begin = static_cast<std::size_t>(tokens[first].data() - tokenized.data());
    const std::string_view& last = tokens[first + order - 1];
    const std::size_t end = static_cast<std::size_t>(last.data() - tokenized.data()) + last.size();
    ++counts[tokenized.substr(begin, end - begin)];
  }
  return counts;
}

}  // namespace detail

/// sacreBLEU's default "13a" tokenizer (tokenizers/tokenizer_13a.py and tokenizer_re.py), the one
/// of WMT's mteval-v13a.pl, byte for byte on UTF-8 text. corpus_bleu also strips trailing
/// whitespace before it calls this, as sacreBLEU does; this function does not.
inline std::string tokenize_13a(std::string_view line) {
  // The order matters: "-\n" joins a word hyphenated across lines before newlines become spaces, and
  // "&amp;lt;" becomes "<" but "&amp;quot;" stays "&quot;", since &quot; is replaced before &amp;.
  std::string text = detail::replace_all(line, "<skipped>", "");
  text = detail::replace_all(text, "-\n", "");
  text = detail::replace_all(text, "\n", " ");
  if (text.find('&') != std::string::npos) {
    text = detail::replace_all(text, "&quot;", "\"");
    text = detail::replace_all(text, "&amp;", "&");
    text = detail::replace_all(text, "&lt;", "<");
    text = detail::replace_all(text, "&gt;", ">");
  }

  std::string spaced = " ";
  spaced.reserve(text.size() * 2 + 2);
  for (const char c : text) {
    if (detail::is_13a_symbol(c)) {
      spaced += ' ';
      spaced += c;
      spaced += ' ';
    } else {
      spaced += c;
    }
  }
  spaced += ' ';

  using detail::is_ascii_digit, detail::is_period_or_comma;
  // Periods and commas are split off unless they sit between two digits ("3.5", "1,000"); Python's
  // [0-9] is ASCII only, so "٣.٥" is split. The two rules run one after the other, as in sacreBLEU.
  spaced = detail::substitute_pairs(
      spaced, [](char a, char b) { return !is_ascii_digit(a) && is_period_or_comma(b); },
      [](std::string& out, char a, char b) { out.append({a, ' ', b, ' '}); });
  spaced = detail::substitute_pairs(
      spaced, [](char a, char b) { return is_period_or_comma(a) && !is_ascii_digit(b); },
      [](std::string& out, char a, char b) { out.append({' ', a, ' ', b}); });
  // A dash after a digit is split off ("1990 - 2000"), one before a digit is not ("-5", "x-5").
  spaced = detail::substitute_pairs(
      spaced, [](char a, char b) { return is_ascii_digit(a) && b == '-'; },
      [](std::string& out, char a, char b) { out.append({a, ' ', b, ' '}); });

  std::string tokenized;
  tokenized.reserve(spaced.size());
  for (const std::string_view word : detail::split_python_words(spaced)) {
    if (!tokenized.empty()) tokenized += ' ';
    tokenized += word;
  }
  return tokenized;
}

/// A corpus BLEU score with the statistics it was computed from, as sacreBLEU's BLEUScore holds them.
struct bleu_score {
  static constexpr std::size_t max_order = 4;

  double score = 0.0;                          ///< 0 to 100
  std::array<double, max_order> precisions{};  ///< per n-gram order, in percent, after smoothing
  std::array<std::uint64_t, max_order> counts{};  ///< matched (clipped) n-grams per order
  std::array<std::uint64_t, max_order> totals{};  ///< hypothesis n-grams per order
  double brevity_penalty = 1.0;
  double ratio = 0.0;  ///< sys_len / ref_len, 0 when ref_len is 0
  std::uint64_t sys_len = 0;  ///< hypothesis tokens
  std::uint64_t ref_len = 0;  ///< tokens of the closest reference of each segment

  /// sacreBLEU's line without the signature, e.g.
  /// "BLEU = 23.45 56.7/30.1/17.8/10.9 (BP = 0.987 ratio = 0.987 hyp_len = 1234 ref_len = 1250)".
  std::string format() const {
    std::string line = "BLEU = " + detail::fixed_decimals(score, 2) + " ";
    for (std::size_t n = 0; n < max_order; ++n) {
      if (n > 0) line += '/';
      line += detail::fixed_decimals(precisions[n], 1);
    }
    line += " (BP = " + detail::fixed_decimals(brevity_penalty, 3);
    line += " ratio = " + detail::fixed_decimals(ratio, 3);
    line += " hyp_len = " + std::to_string(sys_len);
    line += " ref_len = " + std::to_string(ref_len) + ")";
    return line;
  }
};

/// Accumulates BLEU's sufficient statistics segment by segment, so that a corpus can be scored while
/// it streams past; score() may be called at any point. Corpus BLEU is not an average of segment
/// scores: the counts are summed first, and the score is computed once from the sums.
class bleu_counter {
 public:
  static constexpr std::size_t max_order = bleu_score::max_order;

  /// Adds one segment: a hypothesis and its references (at least one), e.g. add(hyp, {ref}) or
  /// add(hyp, std::vector<std::string>{...}).
  void add(std::string_view hypothesis, std::initializer_list<std::string_view> references) {
    add_segment(hypothesis, std::vector<std::string_view>(references));
  }

  template <std::ranges::input_range References>
    requires std::convertible_to<std::ranges::range_reference_t<References>, std::string_view>
  void add(std::string_view hypothesis, const References& references) {
    std::vector<std::string_view> views;
    for (auto&& reference : references) views.emplace_back(reference);
    add_segment(hypothesis, views);
  }

  std::size_t segments() const noexcept { return segments_; }

  /// sacreBLEU's BLEU.compute_bleu with smooth_method="exp" and effective_order=False
  /// (metrics/bleu.py), operation for operation so that the doubles come out the same.
  bleu_score score() const {
    bleu_score result;
    result.counts = counts_;
    result.totals = totals_;
    result.sys_len = sys_len_;
    result.ref_len = ref_len_;
    const auto sys_len = static_cast<double>(sys_len_), ref_len = static_cast<double>(ref_len_);
    result.ratio = ref_len_ > 0 ? sys_len / ref_len : 0.0;
    if (sys_len_ < ref_len_) result.brevity_penalty = sys_len_ > 0 ? std::exp(1.0 - ref_len / sys_len) : 0.0;

    // No match at any order: 0, with all precisions left at 0 (sacreBLEU issue #141).
    if (std::all_of(counts_.begin(), counts_.end(), [](std::uint64_t count) { return count == 0; }))
      return result;

    // NIST's smoothing: the k-th order without a match counts as 1 / 2^k of a match. An order with no
    // n-grams at all (every hypothesis shorter than it) ends the loop and keeps precision 0, which
    // makes the score 0; sacreBLEU does not shrink the order unless asked to (effective_order).
    double smoothing = 1.0;
    for (std::size_t n = 0; n < max_order; ++n) {
      if (totals_[n] == 0) break;
      const auto total = static_cast<double>(totals_[n]);
      if (counts_[n] == 0) {
        smoothing *= 2.0;
        result.precisions[n] = 100.0 / (smoothing * total);
      } else {
        result.precisions[n] = 100.0 * static_cast<double>(counts_[n]) / total;
      }
    }

    // sacreBLEU's my_log floors log(0) at -9999999999 instead of -inf. Summed left to right as Python
    // 3.11's sum() does; 3.12's compensated sum() may differ from this in the last bit.
    double log_sum = 0.0;
    for (const double precision : result.precisions)
      log_sum += precision == 0.0 ? -9999999999.0 : std::log(precision);
    result.score = result.brevity_penalty * std::exp(log_sum / static_cast<double>(max_order));
    return result;
  }

 private:
  void add_segment(std::string_view hypothesis, const std::vector<std::string_view>& references) {
    if (references.empty()) throw std::invalid_argument("bleu_counter::add: a segment needs at least one reference");

    // sacreBLEU strips trailing whitespace before tokenizing (BLEU._preprocess_segment), which keeps a
    // final "-\n" from joining the last word to nothing.
    const std::string hypothesis_text = tokenize_13a(detail::rstrip_python(hypothesis));
    const std::vector<std::string_view> hypothesis_tokens = detail::split_python_words(hypothesis_text);

    std::vector<std::string> reference_texts;
    std::vector<std::vector<std::string_view>> reference_tokens;
    reference_texts.reserve(references.size());
    reference_tokens.reserve(references.size());
    for (const std::string_view reference : references) {
      reference_texts.push_back(tokenize_13a(detail::rstrip_python(reference)));
      reference_tokens.push_back(detail::split_python_words(reference_texts.back()));
    }

    // The closest reference length; on a tie the shorter reference (BLEU._get_closest_ref_len).
    const std::size_t hypothesis_length = hypothesis_tokens.size();
    std::size_t closest_length = reference_tokens.front().size();
    for (const auto& tokens : reference_tokens) {
      const std::size_t length = tokens.size();
      const auto distance = [&](std::size_t other) {
        return other > hypothesis_length ? other - hypothesis_length : hypothesis_length - other;
      };
      if (distance(length) < distance(closest_length) ||
          (distance(length) == distance(closest_length) && length < closest_length))
        closest_length = length;
    }
    sys_len_ += hypothesis_length;
    ref_len_ += closest_length;

    for (std::size_t order = 1; order <= max_order; ++order) {
      // Each n-gram may be matched as often as it occurs in the reference that has it most often.
      detail::ngram_counts most_in_any_reference;
      for (std::size_t r = 0; r < reference_texts.size(); ++r) {
        for (const auto& [ngram, count] : detail::count_word_ngrams(reference_texts[r], reference_tokens[r], order)) {
          std::uint32_t& most = most_in_any_reference[ngram];
          most = std::max(most, count);
        }
      }
      for (const auto& [ngram, count] : detail::count_word_ngrams(hypothesis_text, hypothesis_tokens, order)) {
        totals_[order - 1] += count;
        if (const auto found = most_in_any_reference.find(ngram); found != most_in_any_reference.end())
          counts_[order - 1] += std::min(count, found->second);
      }
    }
    ++segments_;
  }

  std::array<std::uint64_t, max_order> counts_{};
  std::array<std::uint64_t, max_order> totals_{};
  std::uint64_t sys_len_ = 0;
  std::uint64_t ref_len_ = 0;
  std::size_t segments_ = 0;
};

namespace detail {

/// The checks of corpus_bleu and corpus_chrf. sacreBLEU itself zips the streams and silently drops
/// the lines of the longer ones (metrics/base.py), which hides misaligned files; this refuses them.
inline void check_streams(const char* function, std::size_t hypotheses,
                          const std::vector<std::vector<std::string>>& references) {
  if (references.empty()) throw std::invalid_argument(std::string(function) + ": no reference streams given");
  for (std::size_t k = 0; k < references.size(); ++k) {
    if (references[k].size() != hypotheses)
      throw std::invalid_argument(std::string(function) + ": reference stream " + std::to_string(k) + " has " +
                                  std::to_string(references[k].size()) + " lines but there are " +
                                  std::to_string(hypotheses) + " hypotheses");
  }
}

}  // namespace detail

/// Corpus BLEU of `hypotheses` against one or more reference streams, references[k][i] being the
/// k-th reference of hypotheses[i]: sacrebleu.corpus_bleu(hypotheses, references) with its
/// defaults. Throws std::invalid_argument when there is no stream or a stream's length differs.
inline bleu_score corpus_bleu(const std::vector<std::string>& hypotheses,
                              const std::vector<std::vector<std::string>>& references) {
  detail::check_streams("corpus_bleu", hypotheses.size(), references);
  bleu_counter counter;
  std::vector<std::string_view> segment_references(references.size());
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    for (std::size_t k = 0; k < references.size(); ++k) segment_references[k] = references[k][i];
    counter.add(hypotheses[i], segment_references);
  }
  return counter.score();
}

}  // namespace attn::text
