// What a tape keeps between the forward and the backward pass: each backward step holds the
// values it reads and no others (variable::without_value), and dropout keeps no mask. Counted
// in host bytes (memory<cpu>::used_bytes), on tensors small enough that no block is cached, so
// every tensor takes exactly its rounded size and a header.
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>

#include <attn/grad.hpp>
#include <attn/train/loss.hpp>

#include "gradcheck.hpp"

namespace {

using namespace attn;
using host = memory<cpu>;

using B = dim<"batch">;
using L = dim<"len">;
using K = dim<"keys">;
using D = dim<"d", 16>;
using F = dim<"f", 32>;
using V = dim<"vocab", 24>;

/// The bytes one live tensor of `count` floats takes (under the block cache's 64 KiB).
std::size_t block_of(index_t count) { return host::rounded(std::size_t(count) * sizeof(float)) + host::alignment; }

template <class S>
grad::variable<float, S> filled(const extents<S>& sizes, float first, bool requires_grad = true) {
  tensor<float, S> t(sizes);
  for (index_t i = 0; i < t.size(); ++i) t.data()[i] = first + 0.01f * float(i % 97) - 0.3f * float(i % 5);
  return grad::variable<float, S>(std::move(t), requires_grad);
}

const extents<shape<B, L, D>> activations(4, 8);  // 512 floats
const extents<shape<B, L, F>> wide(4, 8);         // 1024 floats

}  // namespace

TEST_CASE("grad: a without_value handle shares the gradient, not the value") {
  const std::size_t before = host::used_bytes();
  auto x = filled(activations, 1.0f);
  auto handle = x.without_value();
  CHECK(handle.same_as(x));
  CHECK(handle.identity() == x.identity());
  CHECK(handle.extents().size() == x.extents().size());
  CHECK_THROWS_AS(handle.value(), std::logic_error);
  handle.accumulate(x.value() * 2.0f);
  REQUIRE(x.has_grad());
  CHECK(x.grad().data()[3] == 2.0f * x.value().data()[3]);
  const std::size_t with_value_and_gradient = host::used_bytes() - before;
  CHECK(with_value_and_gradient == 2 * block_of(512));
  x = filled(activations, 5.0f);  // the only handle that held the first value lets go
  CHECK(host::used_bytes() - before == 2 * block_of(512));  // the new value, the old gradient
  CHECK(handle.has_grad());
}

TEST_CASE("grad: sums, scaling, dropout, head moves and casts keep no value for the backward pass") {
  auto x = filled(activations, 1.0f);
  x.value() = fill<float, cpu>(x.extents(), 1.0f);
  grad::tape tape;
  random_stream stream(11);
  const std::size_t before = host::used_bytes();
  // y = 2x + dropout(x): every intermediate is gone once the expression is done, and dropout
  // keeps no mask.
  const auto y = grad::add(&tape, grad::scale(&tape, x, 2.0f), grad::dropout(&tape, x, 0.5, stream));
  CHECK(host::used_bytes() - before == block_of(512));  // y alone
  SUBCASE("heads split and merged, a cast there and back") {
    using H = dim<"heads", 4>;
    using DH = dim<"d_head", 4>;
    const auto moved = grad::cast<float>(
        &tape, grad::cast<double>(&tape, grad::merge_heads<D>(&tape, grad::split_heads<H, DH, L>(&tape, y))));
    CHECK(host::used_bytes() - before == 2 * block_of(512));  // y and moved
  }
  SUBCASE("the gradient of the sum of y over x is 2 + mask: with x = 1, y itself") {
    // The backward pass drew the forward's numbers again.
    grad::backward(tape, grad::sum<D>(&tape, grad::sum<L>(&tape, grad::sum<B>(&tape, y))));
    index_t dropped = 0;
    for (index_t i = 0; i < x.value().size(); ++i) {
      CHECK(x.grad().data()[i] == y.value().data()[i]);
      dropped += y.value().data()[i] == 2.0f;
    }
    CHECK(dropped > 0);
    CHECK(dropped < x.value().size());
  }
}

TEST_CASE("grad: a product keeps each operand only for the other's gradient; linear keeps its ReLU's output") {
  auto x = filled(activations, 0.5f);
  auto keys = filled(extents<shape<B, K, D>>(4, 8), 0.25f);
  grad::parameter<float, shape<D, F>> w(extents<shape<D, F>>{});
  grad::parameter<float, shape<F>> b(extents<shape<F>>{});
  test::fill_random(w.value());
  grad::tape tape;
  const std::size_t before = host::used_bytes();
  SUBCASE("linear: x and W, which the test holds anyway") {
    auto y = grad::scale(&tape, grad::linear(&tape, x, w, b), 2.0f);
    CHECK(host::used_bytes() - before == block_of(1024));  // y alone
  }
  SUBCASE("linear with ReLU: also its output, for the ReLU's mask") {
    auto y = grad::scale(&tape, grad::linear_relu(&tape, x, w, b), 2.0f);
    CHECK(host::used_bytes() - before == 2 * block_of(1024));
  }
  SUBCASE("product of two intermediates: both kept") {
    auto y = grad::product<D>(&tape, grad::scale(&tape, x, 2.0f), grad::scale(&tape, keys, 3.0f));  // [B, L, K]
    CHECK(host::used_bytes() - before == 2 * block_of(512) + block_of(4 * 8 * 8));
  }
  SUBCASE("product with a constant: the intermediate operand is not kept") {
    const auto constant = filled(extents<shape<B, K, D>>(4, 8), 0.2f, false);
    const std::size_t with_constant = host::used_bytes();
    auto y = grad::product<D>(&tape, grad::scale(&tape, x, 2.0f), constant);
    CHECK(host::used_bytes() - with_constant == block_of(4 * 8 * 8));
  }
}

TEST_CASE("grad: softmax keeps its output, layer_norm its input and statistics, the loss its probabilities") {
  auto x = filled(activations, 0.5f);
  grad::parameter<float, shape<D>> gamma(extents<shape<D>>{}), beta(extents<shape<D>>{});
  gamma.value() = fill<float, cpu>(gamma.extents(), 1.0f);
  grad::tape tape;
  const std::size_t before = host::used_bytes();
  SUBCASE("softmax: its output, not its input") {
    auto y = grad::scale(&tape, grad::softmax<D>(&tape, grad::scale(&tape, x, 2.0f), 1.0f), 2.0f);
    CHECK(host::used_bytes() - before == 2 * block_of(512));
  }
  SUBCASE("layer_norm: its input and two statistics a row, not its output") {
    auto y = grad::scale(&tape, grad::layer_norm(&tape, grad::scale(&tape, x, 2.0f), gamma, beta), 2.0f);
    CHECK(host::used_bytes() - before == 2 * block_of(512) + 2 * block_of(32));
  }
  SUBCASE("cross-entropy: the probabilities, token weights and targets, not the logits") {
    const extents<shape<B, L, V>> logit_sizes(4, 8);
    tensor<std::int32_t, shape<B, L>> targets(4, 8);
    for (index_t i = 0; i < targets.size(); ++i) targets.data()[i] = std::int32_t(1 + i % 23);
    const std::size_t with_targets = host::used_bytes();
    const auto result = train::cross_entropy(&tape, grad::scale(&tape, filled(logit_sizes, 0.1f), 2.0f), targets, 0.1,
                                             std::int32_t{0});
    // probabilities (768 floats), weights and targets (32 each), the loss (1)
    CHECK(host::used_bytes() - with_targets ==
          block_of(768) + block_of(32) + host::rounded(32 * sizeof(std::int32_t)) + host::alignment + block_of(1));
  }
}
