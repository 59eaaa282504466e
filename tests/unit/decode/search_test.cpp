// Greedy and beam search as searches, on scorers whose next-token tables are set by hand or
// drawn from a seed (include/attn/decode/search.hpp, greedy.hpp, beam.hpp).
#include <doctest/doctest.h>

#include <attn/decode/beam.hpp>
#include <attn/decode/greedy.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <random>

using namespace attn;
using decode::token;

namespace {

/// A next_token_scorer whose log-probabilities are a function of (sentence, prefix).
struct function_scorer {
  using table = std::function<std::vector<float>(std::size_t sentence, const std::vector<token>& prefix)>;
  index_t vocabulary;
  table next;
  std::vector<std::size_t> sentence_of;         // per row
  std::vector<std::vector<token>> prefix_of;    // per row, without the start symbol
  bool started = false;
  int calls = 0;

  function_scorer(index_t v, std::size_t sentences, table f) : vocabulary(v), next(std::move(f)) {
    for (std::size_t s = 0; s < sentences; ++s) sentence_of.push_back(s);
    prefix_of.resize(sentences);
  }
  index_t vocabulary_size() const { return vocabulary; }
  void score(std::span<const token> last, std::vector<float>& out) {
    REQUIRE(last.size() == prefix_of.size());
    out.clear();
    for (std::size_t r = 0; r < last.size(); ++r) {
      if (started) prefix_of[r].push_back(last[r]);
      const auto p = next(sentence_of[r], prefix_of[r]);
      out.insert(out.end(), p.begin(), p.end());
    }
    started = true;
    ++calls;
  }
  void keep(std::span<const index_t> rows) {
    std::vector<std::size_t> sentences;
    std::vector<std::vector<token>> prefixes;
    for (index_t r : rows) {
      sentences.push_back(sentence_of[std::size_t(r)]);
      prefixes.push_back(prefix_of[std::size_t(r)]);
    }
    sentence_of = std::move(sentences);
    prefix_of = std::move(prefixes);
  }
};

/// Log-probabilities drawn from a seed and the prefix: the same prefix always gets the same table.
function_scorer::table random_tables(index_t vocabulary, std::uint64_t seed, float eos_bias = 0.0f, token eos = 0) {
  return [=](std::size_t sentence, const std::vector<token>& prefix) {
    std::uint64_t h = seed * 0x9E3779B97F4A7C15ull + sentence;
    for (token t : prefix) h = (h ^ std::uint64_t(t + 1)) * 0x100000001b3ull;
    std::mt19937_64 draw(h);
    std::normal_distribution<float> logit(0.0f, 2.0f);
    std::vector<float> p(static_cast<std::size_t>(vocabulary));
    for (auto& x : p) x = logit(draw);
    p[std::size_t(eos)] += eos_bias;
    float max = *std::max_element(p.begin(), p.end()), total = 0;
    for (float x : p) total += std::exp(x - max);
    for (auto& x : p) x = x - max - std::log(total);
    return p;
  };
}

decode::search_options options_with(int beam, double alpha, int offset, token eos = 0) {
  decode::search_options o;
  const token bos = 1000, pad = -1;  // outside the tables: every token of a table may be output
  o.pad = pad;
  o.beam = beam;
  o.alpha = alpha;
  o.max_length_offset = offset;
  o.eos = eos;
  o.bos = bos;
  return o;
}

}  // namespace

TEST_CASE("decode: the length penalty is GNMT's ((5 + |Y|) / 6)^α") {
  CHECK(decode::length_penalty(1, 0.6) == doctest::Approx(1.0));
  CHECK(decode::length_penalty(5, 0.6) == doctest::Approx(std::pow(10.0 / 6.0, 0.6)));
  CHECK(decode::length_penalty(12, 0.0) == 1.0);
  CHECK(decode::length_penalty(25, 1.0) == doctest::Approx(5.0));
}

TEST_CASE("decode: bad search options are refused") {
  const std::vector<index_t> lengths{3};
  function_scorer scorer(5, 1, random_tables(5, 1));
  CHECK_THROWS_AS(decode::beam_search(scorer, lengths, options_with(0, 0.6, 5)), std::invalid_argument);
  auto o = options_with(2, 0.6, 5);
  o.nbest = 3;
  CHECK_THROWS_AS(decode::beam_search(scorer, lengths, o), std::invalid_argument);
  CHECK_THROWS_AS(decode::greedy_search(scorer, lengths, options_with(1, -1.0, 5)), std::invalid_argument);
  // A vocabulary of padding and the start symbol only: nothing greedy search may output.
  function_scorer tiny(2, 1, random_tables(2, 1));
  auto nothing = options_with(1, 0.6, 5);
  nothing.pad = 0;
  nothing.bos = 1;
  nothing.eos = 5;
  CHECK_THROWS_WITH_AS(decode::greedy_search(tiny, lengths, nothing),
                       doctest::Contains("no token of the vocabulary of 2 may be output"), std::invalid_argument);
}

TEST_CASE("decode: greedy search follows the most probable token and scores it") {
  // eos = 0; after [] the best is 2, after [2] it is 1, after [2, 1] the end.
  const function_scorer::table table = [](std::size_t, const std::vector<token>& prefix) {
    std::vector<float> p{std::log(0.1f), std::log(0.2f), std::log(0.7f)};
    if (prefix.size() == 1) p = {std::log(0.3f), std::log(0.6f), std::log(0.1f)};
    if (prefix.size() == 2) p = {std::log(0.8f), std::log(0.1f), std::log(0.1f)};
    return p;
  };
  function_scorer scorer(3, 1, table);
  const std::vector<index_t> lengths{4};
  const auto result = decode::greedy_search(scorer, lengths, options_with(1, 0.6, 50));
  REQUIRE(result.size() == 1);
  CHECK(result[0].tokens == std::vector<token>{2, 1});
  const double log_prob = double(std::log(0.7f)) + double(std::log(0.6f)) + double(std::log(0.8f));
  CHECK(result[0].log_prob == doctest::Approx(log_prob));
  CHECK(result[0].score == doctest::Approx(log_prob / decode::length_penalty(3, 0.6)));
}

TEST_CASE("decode: beam search with beam 1 is greedy search") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const std::vector<index_t> lengths{3, 7, 1, 5};
    function_scorer greedy_scorer(9, lengths.size(), random_tables(9, seed, 1.0f));
    function_scorer beam_scorer(9, lengths.size(), random_tables(9, seed, 1.0f));
    const auto o = options_with(1, 0.6, 4);
    const auto greedy = decode::greedy_search(greedy_scorer, lengths, o);
    const auto beam = decode::beam_search(beam_scorer, lengths, o);
    for (std::size_t s = 0; s < lengths.size(); ++s) {
      REQUIRE(beam[s].size() == 1);
      CHECK(beam[s][0].tokens == greedy[s].tokens);
      CHECK(beam[s][0].log_prob == greedy[s].log_prob);
      CHECK(beam[s][0].score == greedy[s].score);
    }
  }
}

TEST_CASE("decode: beam 2 finds the sequence greedy search misses") {
  // eos = 0, A = 1, B = 2. Greedy takes A (0.6) and then ends with A A: 0.6 · 0.35 · 1 = 0.21.
  // B (0.4) then the end (0.9) is 0.36, and shorter.
  const function_scorer::table table = [](std::size_t, const std::vector<token>& prefix) {
    auto logs = [](float eos, float a, float b) { return std::vector<float>{std::log(eos), std::log(a), std::log(b)}; };
    if (prefix.empty()) return logs(1e-6f, 0.6f, 0.4f);
    if (prefix == std::vector<token>{1}) return logs(0.3f, 0.35f, 0.35f);
    if (prefix == std::vector<token>{2}) return logs(0.9f, 0.05f, 0.05f);
    return logs(1.0f - 2e-6f, 1e-6f, 1e-6f);
  };
  const std::vector<index_t> lengths{5};
  for (double alpha : {0.0, 0.6}) {
    function_scorer g(3, 1, table), b(3, 1, table);
    const auto greedy = decode::greedy_search(g, lengths, options_with(1, alpha, 10));
    CHECK(greedy[0].tokens == std::vector<token>{1, 1});
    auto o = options_with(2, alpha, 10);
    o.nbest = 2;
    const auto beam = decode::beam_search(b, lengths, o);
    REQUIRE(beam[0].size() == 2);
    CHECK(beam[0][0].tokens == std::vector<token>{2});
    CHECK(beam[0][0].log_prob == doctest::Approx(std::log(0.4) + std::log(0.9)).epsilon(1e-6));
    CHECK(beam[0][0].score > greedy[0].score);
    CHECK(beam[0][1].score <= beam[0][0].score);
  }
}

TEST_CASE("decode: a beam as wide as the search space finds the best sequence that brute force finds") {
  // Vocabulary {end, 1, 2}; at most 4 tokens before the end: 1 + 2 + 4 + 8 + 16 = 31 sentences.
  // A beam of 64 holds every extension of every step, so the search is exhaustive.
  constexpr index_t vocabulary = 3;
  constexpr int max_length = 4;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    for (double alpha : {0.0, 0.6, 2.0}) {
      const auto table = random_tables(vocabulary, seed);
      std::vector<decode::hypothesis> all;
      std::vector<token> prefix;
      std::function<void(double)> enumerate = [&](double log_prob) {
        const auto p = table(0, prefix);
        const double ended = log_prob + double(p[0]);
        all.push_back({prefix, ended, ended / decode::length_penalty(prefix.size() + 1, alpha)});
        if (int(prefix.size()) == max_length) return;
        for (token t = 1; t < vocabulary; ++t) {
          prefix.push_back(t);
          enumerate(log_prob + double(p[std::size_t(t)]));
          prefix.pop_back();
        }
      };
      enumerate(0.0);
      REQUIRE(all.size() == 31);
      std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.score > b.score; });

      function_scorer scorer(vocabulary, 1, table);
      auto o = options_with(64, alpha, max_length);
      o.nbest = 5;
      const std::vector<index_t> lengths{0};
      const auto found = decode::beam_search(scorer, lengths, o);
      REQUIRE(found[0].size() == 5);
      for (std::size_t i = 0; i < 5; ++i) {
        CAPTURE(seed);
        CAPTURE(alpha);
        CAPTURE(i);
        CHECK(found[0][i].tokens == all[i].tokens);
        CHECK(found[0][i].score == doctest::Approx(all[i].score).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("decode: a batch of sentences is searched as each sentence alone") {
  const std::vector<index_t> lengths{2, 6, 0, 4, 3};
  for (int beam : {1, 3, 4}) {
    auto o = options_with(beam, 0.6, 5);
    o.nbest = beam;
    function_scorer together(11, lengths.size(), random_tables(11, 7, 0.5f));
    const auto batched = decode::beam_search(together, lengths, o);
    const auto greedy_batched = [&] {
      function_scorer g(11, lengths.size(), random_tables(11, 7, 0.5f));
      return decode::greedy_search(g, lengths, o);
    }();
    for (std::size_t s = 0; s < lengths.size(); ++s) {
      // Sentence s alone: the table is looked up with its own sentence number.
      const auto table = random_tables(11, 7, 0.5f);
      function_scorer alone(11, 1, [&](std::size_t, const std::vector<token>& p) { return table(s, p); });
      const std::vector<index_t> one{lengths[s]};
      const auto single = decode::beam_search(alone, one, o);
      REQUIRE(single[0].size() == batched[s].size());
      for (std::size_t i = 0; i < single[0].size(); ++i) {
        CHECK(single[0][i].tokens == batched[s][i].tokens);
        CHECK(single[0][i].score == batched[s][i].score);
      }
      function_scorer greedy_alone(11, 1, [&](std::size_t, const std::vector<token>& p) { return table(s, p); });
      CHECK(decode::greedy_search(greedy_alone, one, o)[0].tokens == greedy_batched[s].tokens);
    }
  }
}

TEST_CASE("decode: outputs stop at the source length + the offset, or the cap; n-best lists are ordered and distinct") {
  const std::vector<index_t> lengths{3, 1};
  // The end symbol is very unlikely: every hypothesis runs to the maximum length.
  auto o = options_with(4, 0.6, 2);
  o.nbest = 4;
  function_scorer g(6, 2, random_tables(6, 3, -30.0f)), b(6, 2, random_tables(6, 3, -30.0f));
  const auto greedy = decode::greedy_search(g, lengths, o);
  const auto beam = decode::beam_search(b, lengths, o);
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    CHECK(index_t(greedy[s].tokens.size()) == lengths[s] + 2);
    REQUIRE(beam[s].size() == 4);
    std::set<std::vector<token>> distinct;
    for (std::size_t i = 0; i < beam[s].size(); ++i) {
      CHECK(index_t(beam[s][i].tokens.size()) == lengths[s] + 2);
      distinct.insert(beam[s][i].tokens);
      if (i > 0) CHECK(beam[s][i].score <= beam[s][i - 1].score);
    }
    CHECK(distinct.size() == 4);
  }
  // A cap below source length + offset bounds every output the same way, whatever its batch.
  o.length_cap = 3;
  function_scorer g3(6, 2, random_tables(6, 3, -30.0f)), b3(6, 2, random_tables(6, 3, -30.0f));
  const auto capped_greedy = decode::greedy_search(g3, lengths, o);
  const auto capped_beam = decode::beam_search(b3, lengths, o);
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    CHECK(index_t(capped_greedy[s].tokens.size()) == std::min<index_t>(lengths[s] + 2, 3));
    for (const auto& h : capped_beam[s]) CHECK(index_t(h.tokens.size()) == std::min<index_t>(lengths[s] + 2, 3));
  }
}

TEST_CASE("decode: ties go to the lowest token id, the end symbol's included, in both searches") {
  // eos = 2 ties with token 1 at every step, and token 0 is less probable: both searches take 1
  // until the length limit (source 1 + offset 2) forces the end.
  const function_scorer::table table = [](std::size_t, const std::vector<token>&) {
    return std::vector<float>{std::log(0.2f), std::log(0.4f), std::log(0.4f)};
  };
  const std::vector<index_t> lengths{1};
  const auto o = options_with(1, 0.6, 2, 2);
  function_scorer g(3, 1, table), b(3, 1, table);
  const auto greedy = decode::greedy_search(g, lengths, o);
  const auto beam = decode::beam_search(b, lengths, o);
  CHECK(greedy[0].tokens == std::vector<token>{1, 1, 1});
  CHECK(beam[0][0].tokens == greedy[0].tokens);
  CHECK(beam[0][0].score == greedy[0].score);
}

TEST_CASE("decode: padding and the start symbol are never output") {
  // Padding (4) and the start symbol (5) are the most probable tokens of every table.
  const function_scorer::table table = [](std::size_t, const std::vector<token>& prefix) {
    std::vector<float> p{prefix.size() < 3 ? -9.0f : -0.5f, -3.0f, -2.0f, -4.0f, -0.1f, -0.2f};
    return p;
  };
  auto o = options_with(2, 0.6, 10);
  o.pad = 4;
  o.bos = 5;
  o.nbest = 2;
  const std::vector<index_t> lengths{3};
  function_scorer g(6, 1, table), b(6, 1, table);
  CHECK(decode::greedy_search(g, lengths, o)[0].tokens == std::vector<token>{2, 2, 2});
  const auto found = decode::beam_search(b, lengths, o);
  REQUIRE(found[0].size() == 2);
  for (const auto& h : found[0])
    for (token t : h.tokens) CHECK((t != 4 && t != 5));
}

TEST_CASE("decode: beam search ends a sentence as soon as k hypotheses have finished and none live outscores them") {
  // The end symbol is certain after one token: all k hypotheses finish at step 2.
  const function_scorer::table table = [](std::size_t, const std::vector<token>& prefix) {
    if (prefix.empty()) return std::vector<float>{-50.0f, std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    return std::vector<float>{0.0f, -50.0f, -50.0f, -50.0f};
  };
  function_scorer scorer(4, 1, table);
  const std::vector<index_t> lengths{10};
  auto o = options_with(3, 0.6, 50);
  o.nbest = 3;
  const auto found = decode::beam_search(scorer, lengths, o);
  CHECK(scorer.calls == 2);
  REQUIRE(found[0].size() == 3);
  CHECK(found[0][0].tokens == std::vector<token>{1});
  CHECK(found[0][1].tokens == std::vector<token>{2});
  CHECK(found[0][2].tokens == std::vector<token>{3});
}

TEST_CASE("decode: beam search goes on while a live hypothesis outscores the finished ones") {
  // A confident model (tests/learning_spread.py found one, half-trained): the sentence 1 2 3 4 5 6
  // at 0.99 a token, and after every proper prefix of it the end symbol second at 0.006. Each of
  // those ends ranks among the first k candidates and finishes, so k short sentences finish
  // before the whole one can; a search that stopped at k finished returned one of them, scoring
  // far below greedy search's whole sentence.
  const function_scorer::table table = [](std::size_t, const std::vector<token>& prefix) {
    std::vector<float> p(8, std::log(0.0005f));  // off the sentence: everything improbable
    const std::vector<token> sentence{1, 2, 3, 4, 5, 6};
    const bool on_it = std::equal(prefix.begin(), prefix.end(), sentence.begin(),
                                  sentence.begin() + std::ptrdiff_t(std::min(prefix.size(), sentence.size())));
    if (on_it && prefix.size() < sentence.size()) {
      p[std::size_t(sentence[prefix.size()])] = std::log(0.99f);
      p[0] = std::log(0.006f);
    } else if (on_it) {
      p[0] = std::log(0.99f);
    }
    return p;
  };
  const std::vector<index_t> lengths{6};
  for (int k : {2, 3, 4}) {
    CAPTURE(k);
    function_scorer g(8, 1, table), b(8, 1, table);
    auto o = options_with(k, 0.6, 10);
    const auto greedy = decode::greedy_search(g, lengths, o);
    REQUIRE(greedy[0].tokens == std::vector<token>{1, 2, 3, 4, 5, 6});
    o.nbest = k;
    const auto beam = decode::beam_search(b, lengths, o);
    REQUIRE(beam[0].size() == std::size_t(k));
    CHECK(beam[0][0].tokens == greedy[0].tokens);
    CHECK(beam[0][0].score == doctest::Approx(greedy[0].score).epsilon(1e-12));
    for (std::size_t i = 1; i < beam[0].size(); ++i) CHECK(beam[0][i].score <= beam[0][i - 1].score);
    // And it stops soon after: once the whole sentence has finished, no live one comes near it.
    CHECK(b.calls <= 8);
  }
}
