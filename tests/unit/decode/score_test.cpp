// Teacher-forced scoring (include/attn/decode/score.hpp) against the model's full forward pass,
// and against the searches' own scores of what they found.
#include <doctest/doctest.h>

#include <attn/attn.hpp>
#include <attn/decode.hpp>
#include <cmath>

#include "../nn/micro.hpp"

// Its own namespace: unit-model compiles its files together (tests/unit/meson.build).
namespace decode_score_test {

using namespace attn;
using decode::token;

namespace {

constexpr index_t vocabulary = 23;
constexpr token pad = 0, bos = 2, eos = 3;

const std::vector<std::vector<token>> sources{{5, 6, 7, 8, 9}, {10, 11}, {12, 13, 14}, {15}};
// Targets of different lengths, one of them empty (the end symbol alone).
const std::vector<std::vector<token>> targets{{4, 9, 9, 17}, {}, {22, 5}, {6, 7, 8, 9, 10, 11}};

decode::search_options options(int beam) {
  decode::search_options o;
  o.beam = o.nbest = beam;
  o.max_length_offset = 4;
  o.bos = bos;
  o.eos = eos;
  return o;
}

/// The plain reference: one sentence alone, the whole target read at once (teacher forcing, as
/// in training), a log-softmax in double over each position's logits, the log-probabilities of
/// the target's tokens and the end symbol summed.
template <class C>
double reference_log_prob(const nn::transformer<double, C>& model, const std::vector<token>& source,
                          const std::vector<token>& target) {
  tensor<nn::token, shape<nn::batch, nn::src>> ids(1, index_t(source.size()) + 1);
  for (std::size_t i = 0; i < source.size(); ++i) ids(0, index_t(i)) = source[i];
  ids(0, index_t(source.size())) = eos;
  tensor<nn::token, shape<nn::batch, nn::tgt>> input(1, index_t(target.size()) + 1);
  input(0, 0) = bos;
  for (std::size_t i = 0; i < target.size(); ++i) input(0, index_t(i) + 1) = target[i];
  const auto logits = model(nn::inference(), ids, input).value();
  double total = 0;
  for (std::size_t position = 0; position <= target.size(); ++position) {
    const double* row = logits.data() + position * std::size_t(vocabulary);
    double largest = row[0], sum = 0;
    for (index_t v = 0; v < vocabulary; ++v) largest = std::max(largest, row[v]);
    for (index_t v = 0; v < vocabulary; ++v) sum += std::exp(row[v] - largest);
    const token next = position < target.size() ? target[position] : eos;
    total += row[next] - largest - std::log(sum);
  }
  return total;
}

}  // namespace

TEST_CASE_TEMPLATE("decode: scoring targets in a batch gives each one's log-probability from the full forward pass", C,
                   test::micro, test::micro_pre_norm, test::micro_learned_untied) {
  const nn::transformer<double, C> model(vocabulary, 7, pad);
  decode::kv_cache_decoder<double, C> cached(model, sources, eos);
  const auto o = options(1);
  const auto scored = decode::score_targets(cached, targets, o);
  REQUIRE(scored.size() == targets.size());
  for (std::size_t s = 0; s < targets.size(); ++s) {
    CAPTURE(s);
    CHECK(scored[s].tokens == targets[s]);
    const double expected = reference_log_prob(model, sources[s], targets[s]);
    CHECK(scored[s].log_prob < 0);
    CHECK(scored[s].log_prob == doctest::Approx(expected).epsilon(1e-6));  // float log-probabilities summed
    CHECK(scored[s].score ==
          doctest::Approx(scored[s].log_prob / decode::length_penalty(targets[s].size() + 1, o.alpha)).epsilon(1e-12));
  }
}

TEST_CASE("decode: scoring what greedy and beam search found gives the searches' own scores") {
  nn::transformer<double, test::micro> model(vocabulary, 5, pad);
  for (auto& p : model.parameters())  // peaked distributions, as a trained model's are
    if (p.name == "embeddings.shared") std::for_each(p.value, p.value + p.size, [](double& x) { x *= 8; });
  const std::vector<index_t> lengths{5, 2, 3, 1};
  for (int beam : {1, 3}) {
    CAPTURE(beam);
    decode::kv_cache_decoder<double, test::micro> searcher(model, sources, eos);
    const auto found = beam == 1 ? std::vector<std::vector<decode::hypothesis>>{}
                                 : decode::beam_search(searcher, lengths, options(beam));
    std::vector<decode::hypothesis> best;
    if (beam == 1) {
      decode::kv_cache_decoder<double, test::micro> greedy(model, sources, eos);
      best = decode::greedy_search(greedy, lengths, options(1));
    } else {
      for (const auto& nbest : found) best.push_back(nbest.front());
    }
    std::vector<std::vector<token>> outputs;
    for (const auto& h : best) outputs.push_back(h.tokens);
    decode::kv_cache_decoder<double, test::micro> scorer(model, sources, eos);
    const auto scored = decode::score_targets(scorer, outputs, options(beam));
    for (std::size_t s = 0; s < best.size(); ++s) {
      CAPTURE(s);
      CHECK(scored[s].log_prob == doctest::Approx(best[s].log_prob).epsilon(1e-9));
      CHECK(scored[s].score == doctest::Approx(best[s].score).epsilon(1e-9));
    }
  }
}

TEST_CASE("decode: a target token no search outputs is refused, naming its sentence") {
  const nn::transformer<double, test::micro> model(vocabulary, 3, pad);
  for (token bad : {pad, bos, eos, token(-1), token(vocabulary)}) {
    CAPTURE(bad);
    decode::kv_cache_decoder<double, test::micro> scorer(model, sources, eos);
    const std::vector<std::vector<token>> wrong{{4}, {5, bad}, {6}, {7}};
    const std::string expected = "target sentence 2 (of this batch) holds token " + std::to_string(bad);
    CHECK_THROWS_WITH_AS(decode::score_targets(scorer, wrong, options(1)), doctest::Contains(expected.c_str()),
                         std::invalid_argument);
  }
}

}  // namespace decode_score_test
