// Decoding a Transformer with the key/value cache against recomputing the whole prefix
// (include/attn/decode/kv_cache.hpp, recompute.hpp), and the attention record.
#include <doctest/doctest.h>

#include <attn/attn.hpp>
#include <attn/decode.hpp>
#include <cmath>

#include "../nn/micro.hpp"

// Its own namespace: unit-model compiles its files together (tests/unit/meson.build).
namespace decode_kv_cache_test {

using namespace attn;
using decode::token;

namespace {

constexpr index_t vocabulary = 23;
constexpr token pad = 0, bos = 2, eos = 3;

const std::vector<std::vector<token>> sources{{5, 6, 7, 8, 9}, {10, 11}, {12, 13, 14}};
const std::vector<index_t> source_lengths{5, 2, 3};

decode::search_options options(int beam, int offset) {
  decode::search_options o;
  o.beam = beam;
  o.nbest = beam;
  o.max_length_offset = offset;
  o.bos = bos;
  o.eos = eos;
  return o;
}

/// A random model whose next-token distributions are peaked, as a trained model's are: the
/// output embeddings scaled up. Near-uniform ones would leave beam search ties that rounding
/// differences between the two decoders break either way.
template <class C>
nn::transformer<double, C> peaked_model(std::uint64_t seed) {
  nn::transformer<double, C> model(vocabulary, seed, pad);
  for (auto& p : model.parameters())
    if (p.name == "embeddings.shared" || p.name == "embeddings.output") std::for_each(p.value, p.value + p.size, [](double& x) { x *= 8; });
  return model;
}

}  // namespace

// The variants whose decoding differs: the query's position enters restricted attention's mask
// rule and ALiBi's bias, and the multi-query cache keeps one head.
TEST_CASE_TEMPLATE("decode: every step's log-probabilities with the cache equal recomputing the prefix", C, test::micro,
                   test::micro_pre_norm, test::micro_learned_untied, test::micro_restricted, test::micro_mqa,
                   test::micro_alibi) {
  const nn::transformer<double, C> model(vocabulary, 11, pad);
  decode::kv_cache_decoder<double, C> cached(model, sources, eos);
  decode::recomputing_decoder<double, C> full(model, sources, eos);
  // A script of steps as a beam search makes them: rows kept twice, dropped, reordered, and
  // swapped within their sentence (the fourth keep: the rows' sentences stay 0, 0, 1).
  const std::vector<std::vector<token>> last{{bos, bos, bos}, {7, 4, 9, 9}, {12, 5}, {6, 6, 6}, {8, 4, 5}, {9, 9, 4}};
  const std::vector<std::vector<index_t>> keep{{0, 0, 2, 1}, {3, 0}, {1, 1, 0}, {1, 0, 2}, {2, 0, 1}};
  std::vector<float> with_cache, without;
  for (std::size_t step = 0; step < last.size(); ++step) {
    cached.score(last[step], with_cache);
    full.score(last[step], without);
    REQUIRE(with_cache.size() == last[step].size() * std::size_t(vocabulary));
    REQUIRE(without.size() == with_cache.size());
    double worst = 0, total = 0;
    for (std::size_t i = 0; i < without.size(); ++i) worst = std::max(worst, std::abs(double(with_cache[i]) - without[i]));
    for (std::size_t i = 0; i < std::size_t(vocabulary); ++i) total += std::exp(double(with_cache[i]));
    CAPTURE(step);
    CHECK(worst < 1e-6);  // float outputs of double models: rounding only
    CHECK(total == doctest::Approx(1.0).epsilon(1e-6));
    if (step < keep.size()) {
      cached.keep(keep[step]);
      full.keep(keep[step]);
    }
  }
  CHECK(cached.steps() == index_t(last.size()));
}

// The encoder's keys and values are kept a sentence each: rows that come k to a sentence attend
// to them as k queries of their sentence; other orders of rows read a copy a row.
TEST_CASE_TEMPLATE("decode: a sentence's rows as its queries, a sentence finishing, and uneven rows, equal recomputing",
                   C, test::micro, test::micro_pre_norm, test::micro_mqa) {
  const nn::transformer<double, C> model(vocabulary, 12, pad);
  decode::kv_cache_decoder<double, C> cached(model, sources, eos);
  decode::recomputing_decoder<double, C> full(model, sources, eos);
  // Two rows a sentence; the pair of each swapped; sentence 2 done (two rows each of 0 and 1);
  // then sentence 0 with one row and sentence 1 with two (uneven); then two of sentence 1 alone.
  const std::vector<std::vector<token>> last{{bos, bos, bos}, {7, 4, 9, 9, 5, 6}, {12, 5, 6, 6, 8, 8},
                                             {6, 7, 8, 9}, {4, 5, 6}, {7, 8}};
  const std::vector<std::vector<index_t>> keep{{0, 0, 1, 1, 2, 2}, {1, 0, 3, 2, 5, 4}, {0, 1, 2, 3}, {0, 2, 3}, {2, 1}};
  std::vector<float> with_cache, without;
  for (std::size_t step = 0; step < last.size(); ++step) {
    CAPTURE(step);
    cached.score(last[step], with_cache);
    full.score(last[step], without);
    REQUIRE(with_cache.size() == without.size());
    double worst = 0;
    for (std::size_t i = 0; i < without.size(); ++i) worst = std::max(worst, std::abs(double(with_cache[i]) - without[i]));
    CHECK(worst < 1e-6);
    if (step < keep.size()) {
      cached.keep(keep[step]);
      full.keep(keep[step]);
    }
  }
}

TEST_CASE_TEMPLATE("decode: cached and uncached greedy and beam search give the same translations", C, test::micro,
                   test::micro_pre_norm, test::micro_learned_untied) {
  const auto model = peaked_model<C>(5);
  const int offset = 4;  // learned positions stop at 12: 5 + 4 tokens and the start symbol fit
  for (int beam : {1, 4}) {
    decode::kv_cache_decoder<double, C> cached(model, sources, eos);
    decode::recomputing_decoder<double, C> full(model, sources, eos);
    const auto a = decode::beam_search(cached, source_lengths, options(beam, offset));
    const auto b = decode::beam_search(full, source_lengths, options(beam, offset));
    for (std::size_t s = 0; s < sources.size(); ++s) {
      REQUIRE(a[s].size() == b[s].size());
      for (std::size_t i = 0; i < a[s].size(); ++i) {
        CHECK(a[s][i].tokens == b[s][i].tokens);
        CHECK(a[s][i].score == doctest::Approx(b[s][i].score).epsilon(1e-6));
        CHECK(index_t(a[s][i].tokens.size()) <= source_lengths[s] + offset);
      }
    }
  }
  decode::kv_cache_decoder<double, C> g1(model, sources, eos), b1(model, sources, eos);
  decode::recomputing_decoder<double, C> g2(model, sources, eos);
  const auto greedy = decode::greedy_search(g1, source_lengths, options(1, offset));
  const auto greedy_full = decode::greedy_search(g2, source_lengths, options(1, offset));
  const auto beam1 = decode::beam_search(b1, source_lengths, options(1, offset));
  for (std::size_t s = 0; s < sources.size(); ++s) {
    CHECK(greedy[s].tokens == greedy_full[s].tokens);
    CHECK(greedy[s].tokens == beam1[s][0].tokens);
    CHECK(greedy[s].score == beam1[s][0].score);
  }
}

TEST_CASE("decode: no sentences decode to no translations") {
  const auto model = peaked_model<test::micro>(5);
  const std::vector<std::vector<token>> none;
  decode::kv_cache_decoder<double, test::micro> beam(model, none, eos), greedy(model, none, eos);
  CHECK(decode::beam_search(beam, std::vector<index_t>{}, options(4, 4)).empty());
  CHECK(decode::greedy_search(greedy, std::vector<index_t>{}, options(1, 4)).empty());
}

TEST_CASE("decode: a sentence decodes the same alone and in a padded batch") {
  const auto model = peaked_model<test::micro>(9);
  decode::kv_cache_decoder<double, test::micro> together(model, sources, eos);
  const auto batched = decode::beam_search(together, source_lengths, options(3, 6));
  for (std::size_t s = 0; s < sources.size(); ++s) {
    const std::vector<std::vector<token>> one{sources[s]};
    const std::vector<index_t> length{source_lengths[s]};
    decode::kv_cache_decoder<double, test::micro> alone(model, one, eos);
    const auto single = decode::beam_search(alone, length, options(3, 6));
    REQUIRE(single[0].size() == batched[s].size());
    for (std::size_t i = 0; i < single[0].size(); ++i) {
      CHECK(single[0][i].tokens == batched[s][i].tokens);
      CHECK(single[0][i].score == doctest::Approx(batched[s][i].score).epsilon(1e-9));
    }
  }
}

TEST_CASE("decode: the attention record holds every layer's weights; padding gets none") {
  const nn::transformer<double, test::micro> model(vocabulary, 3, pad);
  nn::attention_record record;
  nn::context ctx;
  ctx.attention = &record;
  decode::kv_cache_decoder<double, test::micro> cached(model, sources, eos, ctx);
  const index_t layers = test::micro::layers;
  CHECK(index_t(record.of(nn::attention_kind::encoder_self).size()) == layers);
  std::vector<float> log_probs;
  cached.score(std::vector<token>{bos, bos, bos}, log_probs);
  cached.score(std::vector<token>{4, 4, 4}, log_probs);
  const auto cross = record.of(nn::attention_kind::encoder_decoder);
  const auto self = record.of(nn::attention_kind::decoder_self);
  REQUIRE(index_t(cross.size()) == 2 * layers);  // two steps
  REQUIRE(index_t(self.size()) == 2 * layers);
  CHECK(self.back()->keys == 2);  // the second step sees two positions
  const auto& w = *cross.front();
  CHECK(w.sentences == 3);
  CHECK(w.heads == test::micro::heads::extent);
  CHECK(w.queries == 1);
  CHECK(w.keys == 6);  // the longest source and its end symbol
  for (index_t s = 0; s < 3; ++s) {
    for (index_t h = 0; h < w.heads; ++h) {
      double total = 0;
      for (index_t k = 0; k < w.keys; ++k) {
        total += w.at(s, h, 0, k);
        if (k > source_lengths[std::size_t(s)]) CHECK(w.at(s, h, 0, k) == 0.0f);  // padding
      }
      CHECK(total == doctest::Approx(1.0).epsilon(1e-5));
    }
  }
}

}  // namespace decode_kv_cache_test
