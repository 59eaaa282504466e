// Tests of include/attn/text/bleu.hpp: sacreBLEU's 13a tokenizer and corpus BLEU. The expected values
// were printed by sacreBLEU 2.6.0 (Python 3.11) with tests/unit/text/sacrebleu_values.py, which holds
// the same inputs; rerun it after changing one.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <attn/text/bleu.hpp>

using attn::text::bleu_counter;
using attn::text::bleu_score;
using attn::text::corpus_bleu;
using attn::text::tokenize_13a;

namespace {

using corpus = std::vector<std::string>;

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

struct expected_bleu {
  double score;
  std::array<double, 4> precisions;
  std::array<std::uint64_t, 4> counts, totals;
  double brevity_penalty, ratio;
  std::uint64_t sys_len, ref_len;
  std::string_view line;
};

// The arithmetic is sacreBLEU's, operation for operation, so the doubles agree to the last bit on
// the same libm; the margin only allows for another libm's exp and log.
void check_same(double actual, double expected) { CHECK(actual == doctest::Approx(expected).epsilon(1e-12)); }

void check_bleu(const bleu_score& actual, const expected_bleu& expected) {
  check_same(actual.score, expected.score);
  for (std::size_t n = 0; n < 4; ++n) check_same(actual.precisions[n], expected.precisions[n]);
  CHECK(actual.counts == expected.counts);
  CHECK(actual.totals == expected.totals);
  check_same(actual.brevity_penalty, expected.brevity_penalty);
  check_same(actual.ratio, expected.ratio);
  CHECK(actual.sys_len == expected.sys_len);
  CHECK(actual.ref_len == expected.ref_len);
  CHECK(actual.format() == expected.line);
}

}  // namespace

TEST_CASE("tokenize_13a splits exactly as sacreBLEU's 13a tokenizer") {
  const std::pair<std::string_view, std::string_view> lines[] = {
      {"Hello, world! It's 3.5 km (or 1,000 m) away.", "Hello , world ! It's 3.5 km ( or 1,000 m ) away ."},
      {"\"Quoted\" text -- with hyphens: well-known, 1990-2000, e-mail; x-5 5-x 5 - 3.",
       "\" Quoted \" text -- with hyphens : well-known , 1990 - 2000 , e-mail ; x-5 5 - x 5 - 3 ."},
      // &quot; is unescaped before &amp;, so "&amp;lt;" becomes "<" but "&amp;quot;" stays "&quot;".
      {"Tom &amp; Jerry &quot;cat&quot; &lt;b&gt; &amp;lt; &amp;quot; &AMP; &amp",
       "Tom & Jerry \" cat \" < b > < & quot ; & AMP ; & amp"},
      {"<skipped> with <skipped>markers and <skip<skipped>ped>", "with markers and < skipped >"},
      {"hyphen-\nated across\nlines -\n end-\n", "hyphenated across lines end"},
      {"¿Dónde está el café? ¡Allí, señor! Cuesta 3,50 €.",
       "¿Dónde está el café ? ¡Allí , señor ! Cuesta 3,50 € ."},
      // No ASCII punctuation and no space: one token.
      {"東京は日本の首都です。人口は1,400万人、面積は2.194km²。",
       "東京は日本の首都です。人口は1,400万人、面積は2.194km²。"},
      {"I love it 😀! 👍🏽. (ok)", "I love it 😀 ! 👍🏽 . ( ok )"},
      // Python's whitespace: no-break, ideographic and thin spaces, U+001C and U+0085 split; U+200B does not.
      {"nbsp\xC2\xA0ideographic\xE3\x80\x80thin\xE2\x80\x89"
       "fs\x1Cnel\xC2\x85zwsp\xE2\x80\x8B"
       "end",
       "nbsp ideographic thin fs nel zwsp\xE2\x80\x8B"
       "end"},
      {"3.5. 1,000, .5 ,5 5. a.b U.S.A. $100.00 -5 5- ... 1..2 a,b,c",
       "3.5 . 1,000 , . 5 , 5 5 . a . b U . S . A . $ 100.00 -5 5 - . . . 1 . . 2 a , b , c"},
      // [0-9] is ASCII only: other digits do not protect a period or comma.
      {"Arabic ٣.٥ fullwidth ３,５ superscript ²,³ café. ñ,",
       "Arabic ٣ . ٥ fullwidth ３ , ５ superscript ² , ³ café . ñ ,"},
      {"\t leading and trailing \r ", "leading and trailing"},
      {"", ""},
      {"[brackets] {braces} <angles> a|b a~b a^b a_b a`b @user #tag 50% a*b a+b a=b back\\slash",
       "[ brackets ] { braces } < angles > a | b a ~ b a ^ b a _ b a ` b @ user # tag 50 % a * b a + b a = b back \\ "
       "slash"},
  };
  for (const auto& line_and_tokens : lines) {
    const std::string_view line = line_and_tokens.first;  // clang 14 cannot capture a structured binding
    CAPTURE(line);
    CHECK(tokenize_13a(line) == line_and_tokens.second);
  }
}

TEST_CASE("corpus BLEU of a mixed corpus: punctuation, numbers, entities, non-ASCII, an empty line") {
  check_bleu(corpus_bleu(hypotheses, {references}),
             {67.31656694520152,
              {88.23529411764706, 78.33333333333333, 67.9245283018868, 58.69565217391305},
              {60, 47, 36, 27},
              {68, 60, 53, 46},
              0.9291088186596912,
              0.9315068493150684,
              68,
              73,
              "BLEU = 67.32 88.2/78.3/67.9/58.7 (BP = 0.929 ratio = 0.932 hyp_len = 68 ref_len = 73)"});
}

TEST_CASE("a short hypothesis is penalized for brevity") {
  check_bleu(corpus_bleu({"the cat", "a dog barked loudly"},
                         {{"the cat sat on the mat", "a dog barked loudly at the mailman"}}),
             {31.140322391459787,
              {100.0, 100.0, 100.0, 100.0},
              {6, 4, 2, 1},
              {6, 4, 2, 1},
              0.31140322391459774,
              0.46153846153846156,
              6,
              13,
              "BLEU = 31.14 100.0/100.0/100.0/100.0 (BP = 0.311 ratio = 0.462 hyp_len = 6 ref_len = 13)"});
}

TEST_CASE("orders without a match are smoothed: 1/2, then 1/4, of a match") {
  check_bleu(corpus_bleu({"the quick brown cat jumps", "a lazy dog sleeps all day"},
                         {{"the quick brown fox jumps", "a lazy cat sleeps all night"}}),
             {26.067788333180488,
              {72.72727272727273, 44.44444444444444, 14.285714285714286, 10.0},
              {8, 4, 1, 0},
              {11, 9, 7, 5},
              1.0,
              1.0,
              11,
              11,
              "BLEU = 26.07 72.7/44.4/14.3/10.0 (BP = 1.000 ratio = 1.000 hyp_len = 11 ref_len = 11)"});
  check_bleu(corpus_bleu({"the quick brown fox jumps", "over the lazy dog"},
                         {{"the quick fox brown jumps", "the dog over lazy"}}),
             {18.575057999133602,
              {100.0, 14.285714285714286, 10.0, 8.333333333333334},
              {9, 1, 0, 0},
              {9, 7, 5, 3},
              1.0,
              1.0,
              9,
              9,
              "BLEU = 18.58 100.0/14.3/10.0/8.3 (BP = 1.000 ratio = 1.000 hyp_len = 9 ref_len = 9)"});
}

TEST_CASE("no match at all, and no 4-gram at all, both give 0") {
  check_bleu(corpus_bleu({"foo bar baz qux"}, {{"alpha beta gamma delta"}}),
             {0.0,
              {0.0, 0.0, 0.0, 0.0},
              {0, 0, 0, 0},
              {4, 3, 2, 1},
              1.0,
              1.0,
              4,
              4,
              "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)"});
  // Every sentence is shorter than 4 tokens: sacreBLEU scores perfect matches 0 (no effective order).
  check_bleu(corpus_bleu({"a b c", "d e"}, {{"a b c", "d e"}}),
             {0.0,
              {100.0, 100.0, 100.0, 0.0},
              {5, 3, 1, 0},
              {5, 3, 1, 0},
              1.0,
              1.0,
              5,
              5,
              "BLEU = 0.00 100.0/100.0/100.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 5 ref_len = 5)"});
}

TEST_CASE("a perfect match scores 100") {
  check_bleu(corpus_bleu(references, {references}),
             {100.00000000000004,
              {100.0, 100.0, 100.0, 100.0},
              {73, 64, 56, 48},
              {73, 64, 56, 48},
              1.0,
              1.0,
              73,
              73,
              "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 73 ref_len = 73)"});
}

TEST_CASE("two reference streams: matches against either, the closest length, the shorter on a tie") {
  // Lengths 6, 8 and 3 against references of 5|7, 6|8 and 2|4 tokens: ref_len = 5 + 8 + 2.
  check_bleu(corpus_bleu({"the cat sat on the mat", "there is a cat on the mat here", "hello there world"},
                         {{"the cat sat on mat", "a cat is on the mat", "hello world"},
                          {"a cat sat on the mat today", "there is a cat on the mat there", "hello there , world"}}),
             {85.78045713848202,
              {88.23529411764706, 85.71428571428571, 81.81818181818181, 87.5},
              {15, 12, 9, 7},
              {17, 14, 11, 8},
              1.0,
              1.1333333333333333,
              17,
              15,
              "BLEU = 85.78 88.2/85.7/81.8/87.5 (BP = 1.000 ratio = 1.133 hyp_len = 17 ref_len = 15)"});
}

TEST_CASE("trailing whitespace, Unicode's included, is stripped before a final \"-\\n\" could join") {
  check_bleu(corpus_bleu({"this is a well-\n", "a known fact-\n\xE3\x80\x80", "x\xC2\xA0y z w\xE2\x80\xA8",
                          "it -\nworks fine for me"},
                         {{"this is a well -", "a known fact -", "x y z w", "it works fine for me"}}),
             {70.62370919450257,
              {87.5, 83.33333333333333, 75.0, 75.0},
              {14, 10, 6, 3},
              {16, 12, 8, 4},
              0.8824969025845955,
              0.8888888888888888,
              16,
              18,
              "BLEU = 70.62 87.5/83.3/75.0/75.0 (BP = 0.882 ratio = 0.889 hyp_len = 16 ref_len = 18)"});
}

TEST_CASE("the counter scores a stream as corpus_bleu scores the whole") {
  bleu_counter counter;
  CHECK(counter.score().score == 0.0);
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    if (i % 2 == 0) {
      counter.add(hypotheses[i], {references[i]});
    } else {
      counter.add(hypotheses[i], std::vector<std::string>{references[i]});
    }
    const corpus seen_hypotheses(hypotheses.begin(), hypotheses.begin() + static_cast<std::ptrdiff_t>(i + 1));
    const corpus seen_references(references.begin(), references.begin() + static_cast<std::ptrdiff_t>(i + 1));
    const bleu_score so_far = corpus_bleu(seen_hypotheses, {seen_references});
    CHECK(counter.score().score == so_far.score);
    CHECK(counter.score().counts == so_far.counts);
  }
  CHECK(counter.segments() == hypotheses.size());
  CHECK(counter.score().score == doctest::Approx(67.31656694520152).epsilon(1e-12));
}

TEST_CASE("misaligned streams are refused instead of truncated") {
  CHECK_THROWS_WITH_AS(corpus_bleu({"a", "b"}, {{"a"}}),
                       "corpus_bleu: reference stream 0 has 1 lines but there are 2 hypotheses",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(corpus_bleu({"a", "b"}, {{"a", "b"}, {"a", "b", "c"}}),
                       "corpus_bleu: reference stream 1 has 3 lines but there are 2 hypotheses",
                       std::invalid_argument);
  CHECK_THROWS_AS(corpus_bleu({"a"}, {}), std::invalid_argument);
  bleu_counter counter;
  CHECK_THROWS_AS(counter.add("a", std::vector<std::string>{}), std::invalid_argument);
  CHECK(counter.segments() == 0);
  // An empty corpus is no error here (sacreBLEU raises IndexError): it scores 0.
  const bleu_score empty = corpus_bleu({}, {{}});
  CHECK(empty.score == 0.0);
  CHECK(empty.format() == "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)");
}
