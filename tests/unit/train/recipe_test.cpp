// The recipe's formulas against values worked out by hand: equation (3) and label smoothing.
#include <doctest/doctest.h>

#include <attn/cpu.hpp>
#include <attn/train/adam.hpp>
#include <attn/train/loss.hpp>
#include <cmath>

using namespace attn;

TEST_CASE("train: the learning rate of equation (3), by hand") {
  // d_model 512, warmup 4000: 512^-0.5 = 0.0441941738, 4000^-1.5 = 3.95284708e-6.
  CHECK(train::noam_rate(512, 1) == doctest::Approx(0.0441941738 * 3.95284708e-6).epsilon(1e-8));
  CHECK(train::noam_rate(512, 1000) == doctest::Approx(0.0441941738 * 1000 * 3.95284708e-6).epsilon(1e-8));
  // The peak, at step = warmup: both terms are 4000^-0.5 = 0.0158113883.
  CHECK(train::noam_rate(512, 4000) == doctest::Approx(0.0441941738 * 0.0158113883).epsilon(1e-8));
  // Then the inverse square root: 16000^-0.5 = 0.00790569415.
  CHECK(train::noam_rate(512, 16000) == doctest::Approx(0.0441941738 * 0.00790569415).epsilon(1e-8));
  CHECK(train::noam_rate(512, 4000) > train::noam_rate(512, 3999));
  CHECK(train::noam_rate(512, 4000) > train::noam_rate(512, 4001));
  // Another d_model and warmup: 256^-0.5 = 1/16, 100^-1.5 = 1e-3.
  CHECK(train::noam_rate(256, 10, 100) == doctest::Approx(10 * 1e-3 / 16).epsilon(1e-12));
  CHECK(train::noam_rate(256, 400, 100) == doctest::Approx(0.05 / 16).epsilon(1e-12));
}

TEST_CASE("train: label-smoothed cross-entropy, by hand") {
  using row = dim<"row">;
  using pos = dim<"pos">;
  using cls = dim<"cls", 3>;
  // Logits (0, ln 2, 0): p = (1/4, 1/2, 1/4). Target 1, ε = 0.1, q = (1/30, 0.9 + 1/30, 1/30):
  // loss = −(0.9 + 1/30) ln(1/2) − (2/30) ln(1/4) = 0.646937 + 0.092420 = 0.739357.
  tensor<double, shape<row, pos, cls>> logits(1, 2);
  logits(0L, 0L, 1L) = std::log(2.0);
  logits(0L, 1L, 1L) = 5.0;  // the second position is padding: it counts for nothing
  tensor<std::int32_t, shape<row, pos>> targets(1, 2);
  targets(0L, 0L) = 1;
  targets(0L, 1L) = 0;
  const auto l = train::cross_entropy(nullptr, grad::variable(logits), targets, 0.1, std::int32_t{0});
  CHECK(l.tokens == 1);
  const double by_hand = (0.9 + 1.0 / 30) * std::log(2.0) + (2.0 / 30) * std::log(4.0);
  CHECK(by_hand == doctest::Approx(0.739357).epsilon(1e-6));
  CHECK(l.loss.value().data()[0] == doctest::Approx(by_hand).epsilon(1e-14));
  CHECK(l.smoothed == doctest::Approx(by_hand).epsilon(1e-14));
  CHECK(l.nll == doctest::Approx(std::log(2.0)).epsilon(1e-14));  // perplexity 2
  // Without smoothing it is the negative log-likelihood.
  const auto plain = train::cross_entropy(nullptr, grad::variable(logits), targets, 0.0, std::int32_t{0});
  CHECK(plain.loss.value().data()[0] == doctest::Approx(std::log(2.0)).epsilon(1e-14));
}
