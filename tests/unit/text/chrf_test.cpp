// Tests of include/attn/text/chrf.hpp: corpus chrF. The expected values were printed by sacreBLEU
// 2.6.0 (Python 3.11) with tests/unit/text/sacrebleu_values.py, which holds the same inputs; rerun it
// after changing one.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <attn/text/chrf.hpp>

using attn::text::chrf_counter;
using attn::text::chrf_score;
using attn::text::corpus_chrf;

namespace {

using corpus = std::vector<std::string>;
using per_order = std::array<std::uint64_t, 6>;

// The corpus of bleu_test.cpp.
const corpus hypotheses = {
    "The cat sat on the mat.",
    "It costs 3.5 dollars, or about 1,000 yen.",
    "\"Hello,\" she said -- a well-known greeting.",
    "Tom &amp; Jerry &lt;3 each other &gt; everyone.",
    "¿Dónde está la biblioteca? ¡Aquí!",
    "東京は日本の首都です。",
    "I love this 😀 so much!",
    "",
    "The meeting is scheduled for 10:30 a.m. on Monday.",
};
const corpus references = {
    "The cat is sitting on the mat.",
    "It costs 3.5 dollars, roughly 1,000 yen.",
    "\"Hello,\" she said: a well-known greeting.",
    "Tom & Jerry <3 each other > everyone.",
    "¿Dónde está la biblioteca? ¡Allí!",
    "東京は日本の首都である。",
    "I love this 😀 very much!",
    "Nothing was translated here.",
    "The meeting is scheduled for 10:30 a.m. on Tuesday.",
};

// The arithmetic is sacreBLEU's, operation for operation, so the doubles agree to the last bit; the
// margin is far below the 0.01 that sacreBLEU prints.
void check_chrf(const chrf_score& actual, double score, std::string_view line, const per_order& hypothesis_ngrams,
                const per_order& reference_ngrams, const per_order& matching_ngrams) {
  CHECK(actual.score == doctest::Approx(score).epsilon(1e-12));
  CHECK(actual.format() == line);
  CHECK(actual.hypothesis_ngrams == hypothesis_ngrams);
  CHECK(actual.reference_ngrams == reference_ngrams);
  CHECK(actual.matching_ngrams == matching_ngrams);
}

}  // namespace

TEST_CASE("corpus chrF of a mixed corpus: punctuation, numbers, entities, non-ASCII, an empty line") {
  check_chrf(corpus_chrf(hypotheses, {references}), 68.27174335867686, "chrF2 = 68.27",
             {228, 220, 212, 204, 196, 188}, {252, 243, 234, 225, 216, 207}, {201, 179, 161, 145, 129, 115});
}

TEST_CASE("chrF counts characters, not bytes: accents, CJK, emoji, a skin-tone modifier") {
  // "👍🏽" is two characters; U+00A0 is whitespace and removed like a space.
  check_chrf(corpus_chrf({"東京は日本の首都です。", "👍🏽 great", "café crème", "¿Qué\xC2\xA0tal?"},
                         {{"東京は日本の首都である。", "👍 great!", "cafe creme", "¿Qué tal?"}}),
             61.58483559779525, "chrF2 = 61.58", {35, 31, 27, 23, 19, 15}, {36, 32, 28, 24, 20, 16},
             {31, 23, 17, 13, 10, 7});
}

TEST_CASE("a short hypothesis loses recall") {
  check_chrf(corpus_chrf({"the cat", "a dog barked loudly"},
                         {{"the cat sat on the mat", "a dog barked loudly at the mailman"}}),
             47.588445481954054, "chrF2 = 47.59", {22, 20, 18, 16, 14, 12}, {45, 43, 41, 39, 37, 35},
             {22, 20, 18, 16, 14, 12});
}

TEST_CASE("a perfect match scores 100, no match 0") {
  check_chrf(corpus_chrf(references, {references}), 100.0, "chrF2 = 100.00", {252, 243, 234, 225, 216, 207},
             {252, 243, 234, 225, 216, 207}, {252, 243, 234, 225, 216, 207});
  check_chrf(corpus_chrf({"xyz"}, {{"abc"}}), 0.0, "chrF2 = 0.00", {3, 2, 1, 0, 0, 0}, {3, 2, 1, 0, 0, 0},
             {0, 0, 0, 0, 0, 0});
}

TEST_CASE("two reference streams: each segment counts with its best reference") {
  check_chrf(corpus_chrf({"the cat sat on the mat", "there is a cat on the mat here", "hello there world"},
                         {{"the cat sat on mat", "a cat is on the mat", "hello world"},
                          {"a cat sat on the mat today", "there is a cat on the mat there", "hello there , world"}}),
             80.84994743613233, "chrF2 = 80.85", {55, 52, 49, 46, 43, 40}, {54, 51, 48, 45, 42, 39},
             {52, 47, 41, 35, 30, 25});
}

TEST_CASE("empty and short lines: orders a reference lacks leave the hypothesis n-grams out") {
  check_chrf(corpus_chrf({"abc", "", "abcdefgh"}, {{"", "abc", "abcdefg h"}}), 91.31118537448397, "chrF2 = 91.31",
             {8, 7, 6, 5, 4, 3}, {11, 9, 7, 5, 4, 3}, {8, 7, 6, 5, 4, 3});
  // Only orders 1 and 2 exist on both sides, so only they are averaged.
  check_chrf(corpus_chrf({"ab"}, {{"abc"}}), 63.636363636363626, "chrF2 = 63.64", {2, 1, 0, 0, 0, 0},
             {3, 2, 1, 0, 0, 0}, {2, 1, 0, 0, 0, 0});
}

TEST_CASE("the counter scores a stream as corpus_chrf scores the whole") {
  chrf_counter counter;
  CHECK(counter.score().score == 0.0);
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    if (i % 2 == 0) {
      counter.add(hypotheses[i], {references[i]});
    } else {
      counter.add(hypotheses[i], std::vector<std::string>{references[i]});
    }
    const corpus seen_hypotheses(hypotheses.begin(), hypotheses.begin() + static_cast<std::ptrdiff_t>(i + 1));
    const corpus seen_references(references.begin(), references.begin() + static_cast<std::ptrdiff_t>(i + 1));
    CHECK(counter.score().score == corpus_chrf(seen_hypotheses, {seen_references}).score);
  }
  CHECK(counter.segments() == hypotheses.size());
}

TEST_CASE("misaligned streams are refused instead of truncated") {
  CHECK_THROWS_WITH_AS(corpus_chrf({"a", "b"}, {{"a"}}),
                       "corpus_chrf: reference stream 0 has 1 lines but there are 2 hypotheses",
                       std::invalid_argument);
  CHECK_THROWS_AS(corpus_chrf({"a"}, {{"a"}, {}}), std::invalid_argument);
  CHECK_THROWS_AS(corpus_chrf({"a"}, {}), std::invalid_argument);
  chrf_counter counter;
  CHECK_THROWS_AS(counter.add("a", std::vector<std::string>{}), std::invalid_argument);
}
